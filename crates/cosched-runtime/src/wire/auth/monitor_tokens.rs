//! The web monitor's tokens: each stands for the user who asked for it (through an authenticated request) until it
//! expires, bounded per user and in all. The monitor spends them; the controller mints them.

use crate::wire::jobs::Identity;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a monitor token stands for its user.
pub const MONITOR_TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Tokens one user holds at once; minting one more drops that user's oldest.
pub const MONITOR_TOKENS_PER_USER: usize = 16;
/// Tokens held in all; minting one more drops the oldest of anyone's.
pub const MONITOR_TOKENS_TOTAL: usize = 4096;

/// The monitor's tokens, each standing for the user who asked for it until it expires. Bounded per user and in
/// all, so minting tokens in a loop costs the daemon nothing but the newest few.
#[derive(Default)]
pub struct MonitorTokens {
    by_token: BTreeMap<String, (Identity, Instant)>,
    /// Tokens in the order they were minted (oldest first).
    minted: VecDeque<String>,
}

impl MonitorTokens {
    /// Remember `token` for `who`, minted at `now`, dropping expired tokens and the oldest beyond the bounds.
    pub fn insert(&mut self, token: String, who: Identity, now: Instant) {
        self.drop_expired(now);
        let held_by_user = self.by_token.values().filter(|(id, _)| id.uid == who.uid).count();
        if held_by_user >= MONITOR_TOKENS_PER_USER {
            if let Some(oldest) =
                self.minted.iter().find(|t| self.by_token.get(*t).is_some_and(|(id, _)| id.uid == who.uid))
            {
                let oldest = oldest.clone();
                self.remove(&oldest);
            }
        }
        if self.by_token.len() >= MONITOR_TOKENS_TOTAL {
            if let Some(oldest) = self.minted.front().cloned() {
                self.remove(&oldest);
            }
        }
        self.minted.push_back(token.clone());
        self.by_token.insert(token, (who, now));
    }

    /// Spend `token` (from a URL) for `fresh`, which stands for the same user from `now`; `None` (and nothing
    /// spent) when `token` stands for nobody.
    pub fn exchange(&mut self, token: &str, fresh: String, now: Instant) -> Option<String> {
        let who = self.identity(token, now)?;
        self.remove(token);
        self.insert(fresh.clone(), who, now);
        Some(fresh)
    }

    /// The user `token` stands for, if it is known and younger than [`MONITOR_TOKEN_LIFETIME`] at `now`.
    pub fn identity(&self, token: &str, now: Instant) -> Option<Identity> {
        let (who, minted) = self.by_token.get(token)?;
        (now.saturating_duration_since(*minted) < MONITOR_TOKEN_LIFETIME).then_some(*who)
    }

    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    fn remove(&mut self, token: &str) {
        self.by_token.remove(token);
        self.minted.retain(|t| t != token);
    }

    fn drop_expired(&mut self, now: Instant) {
        while let Some(oldest) = self.minted.front() {
            match self.by_token.get(oldest) {
                Some((_, minted)) if now.saturating_duration_since(*minted) < MONITOR_TOKEN_LIFETIME => break,
                _ => {
                    let oldest = oldest.clone();
                    self.by_token.remove(&oldest);
                    self.minted.pop_front();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32) -> Identity {
        Identity { uid, gid: uid, admin: false }
    }

    #[test]
    fn a_token_expires_after_its_lifetime() {
        let mut tokens = MonitorTokens::default();
        let minted = Instant::now();
        tokens.insert("a".into(), user(1), minted);
        assert_eq!(tokens.identity("a", minted + MONITOR_TOKEN_LIFETIME / 2), Some(user(1)));
        assert_eq!(tokens.identity("a", minted + MONITOR_TOKEN_LIFETIME), None);
        tokens.insert("b".into(), user(1), minted + MONITOR_TOKEN_LIFETIME);
        assert_eq!(tokens.len(), 1, "the expired token is dropped at the next mint");
    }

    #[test]
    fn one_user_holds_at_most_a_few_tokens_and_loses_the_oldest() {
        let mut tokens = MonitorTokens::default();
        let now = Instant::now();
        tokens.insert("other".into(), user(2), now);
        for i in 0..200_000 {
            tokens.insert(format!("t{i}"), user(1), now);
        }
        assert_eq!(tokens.len(), MONITOR_TOKENS_PER_USER + 1);
        assert_eq!(tokens.identity("t0", now), None);
        assert_eq!(tokens.identity("t199999", now), Some(user(1)));
        assert_eq!(tokens.identity("other", now), Some(user(2)), "another user's token survives the flood");
    }

    #[test]
    fn all_users_together_hold_a_bounded_number_of_tokens() {
        let mut tokens = MonitorTokens::default();
        let now = Instant::now();
        for uid in 0..(MONITOR_TOKENS_TOTAL as u32 + 100) {
            tokens.insert(format!("u{uid}"), user(uid), now);
        }
        assert_eq!(tokens.len(), MONITOR_TOKENS_TOTAL);
        assert_eq!(tokens.identity("u0", now), None);
    }

    #[test]
    fn a_token_from_a_url_is_spent_for_a_fresh_one_of_the_same_user() {
        let mut tokens = MonitorTokens::default();
        let now = Instant::now();
        tokens.insert("url".into(), user(7), now);
        assert_eq!(tokens.exchange("url", "session".into(), now).as_deref(), Some("session"));
        assert_eq!(tokens.identity("url", now), None, "spent");
        assert_eq!(tokens.identity("session", now), Some(user(7)));
        assert_eq!(tokens.exchange("url", "again".into(), now), None);
        assert_eq!(tokens.identity("again", now), None, "a spent token mints nothing");
    }
}
