//! Who is at the other end of a TCP connection, proved, never claimed (see `docs/security.md`, "Identity").
//!
//! Users and agents prove who they are with MUNGE credentials, each bound to one purpose and to the nonce the
//! controller gave this connection, so a credential seen on the wire is worth nothing on another connection.
//! Agents may instead prove with an HMAC of the same text under a shared key that only root can read; the key
//! itself never crosses the network. The controller proves itself to agents and remote users the same way before
//! they act on anything it says: an agent obeys its controller as root, so a program squatting on the
//! controller's port while it is down must not be able to pose as it.
//!
//! With the key, the controller's proof answers the challenge, before the peer proves anything. With MUNGE it
//! comes only once the peer has proved who it is, restricted to that peer's uid: a controller that minted a
//! credential of root for whoever asks would hand every unauthenticated peer a root credential of the realm,
//! which a service that trusts a credential's uid without reading its payload would accept. Every credential is
//! restricted to its one recipient, the peers' to the controller's uid (root), as Slurm restricts its own.

use crate::protocol::{AgentProof, ControllerProof, MAX_NONCE_CHARS};
use cosched_munge::{bound_payload, Munge};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path;
use std::sync::Arc;

/// The shortest key accepted, in bytes (256 bits: `openssl rand -hex 32` gives 64 characters).
pub const MIN_KEY_BYTES: usize = 32;
/// The controller runs as root: only root may decode the credentials its peers make for it.
pub const CONTROLLER_UID: u32 = 0;
/// Agents run as root too: the controller's proof to an agent is for root's decoding.
pub const AGENT_UID: u32 = 0;

/// The agents' shared key, read from a file that only root may read.
pub struct AgentKey {
    key: Vec<u8>,
}

impl AgentKey {
    /// Read the key, refusing a file that is not root's, not a regular file, or open to group or others.
    pub fn load(path: &Path) -> Result<AgentKey, String> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
        if !meta.is_file() {
            return Err(format!("key file {}: not a regular file", path.display()));
        }
        if meta.uid() != 0 {
            return Err(format!(
                "key file {} belongs to uid {}: it must be root's (chown root)",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(format!(
                "key file {} has mode {:04o}: group and others must have no access (chmod 600)",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        let text = std::fs::read(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
        let key = text.trim_ascii().to_vec();
        if key.len() < MIN_KEY_BYTES {
            return Err(format!(
                "key file {}: the key has {} bytes, at least {MIN_KEY_BYTES} are needed (openssl rand -hex 32)",
                path.display(),
                key.len()
            ));
        }
        Ok(AgentKey { key })
    }

    fn mac(&self, text: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(text);
        mac
    }

    pub fn sign(&self, text: &[u8]) -> String {
        self.mac(text).finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Does `hex` sign `text`? (Compared in constant time.)
    pub fn verifies(&self, text: &[u8], hex: &str) -> bool {
        decode_hex(hex).is_some_and(|tag| self.mac(text).verify_slice(&tag).is_ok())
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || hex.len() > 128 {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

/// A fresh nonce for one connection (128 bits from the kernel's generator, in hex).
pub fn fresh_nonce() -> Result<String, String> {
    crate::job_tag::random_hex(16).map_err(|e| format!("no random nonce: {e}"))
}

/// A nonce a peer sent: hex and short, so it cannot smuggle anything into the texts that are signed.
pub fn check_peer_nonce(nonce: &str) -> Result<(), String> {
    if nonce.is_empty() || nonce.len() > MAX_NONCE_CHARS || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("a nonce is 1 to {MAX_NONCE_CHARS} hex digits"));
    }
    Ok(())
}

fn agent_text(node: &str, nonce: &str) -> Vec<u8> {
    bound_payload("agent", &format!("{node}:{nonce}"))
}

/// The means one side has to prove itself and to check the other: MUNGE, the agents' key, or both.
#[derive(Clone, Default)]
pub struct Credentials {
    pub munge: Option<Arc<Munge>>,
    pub agent_key: Option<Arc<AgentKey>>,
}

impl Credentials {
    fn munge(&self) -> Result<&Munge, String> {
        self.munge.as_deref().ok_or_else(|| "MUNGE is not in use here".to_string())
    }

    /// The controller's answer to a challenge: its nonce for the peer and, with the agents' key, the HMAC over the
    /// peer's nonce. Never a MUNGE credential: the peer has proved nothing yet (see `munge_proof_for`).
    pub fn prove_controller(&self, our_nonce: String, their_nonce: Option<&str>) -> Result<ControllerProof, String> {
        let mut proof = ControllerProof { nonce: our_nonce, ..ControllerProof::default() };
        if let Some(nonce) = their_nonce {
            check_peer_nonce(nonce)?;
            proof.hmac = self.agent_key.as_ref().map(|key| key.sign(&bound_payload("controller", nonce)));
        }
        Ok(proof)
    }

    /// The controller's MUNGE proof over the peer's nonce, for a peer that has proved it is `peer_uid`: only that
    /// uid may decode it. `None` without MUNGE or without a nonce of the peer's.
    pub fn munge_proof_for(&self, their_nonce: Option<&str>, peer_uid: u32) -> Result<Option<String>, String> {
        let (Some(munge), Some(nonce)) = (&self.munge, their_nonce) else { return Ok(None) };
        let text = bound_payload("controller", nonce);
        munge.encode_for(&text, peer_uid).map(Some).map_err(|e| e.to_string())
    }

    /// Does the answer to a challenge already prove the controller (the agents' key), or must the peer prove
    /// itself first and check the controller's MUNGE proof after (`munge_proof_for`)?
    pub fn proved_by_challenge(&self) -> bool {
        self.agent_key.is_some()
    }

    /// Check that a proof over our challenge (`our_nonce`) came from the controller: the HMAC under our key when
    /// we have one, else a MUNGE credential of root.
    pub fn check_controller(&self, proof: &ControllerProof, our_nonce: &str) -> Result<(), String> {
        let text = bound_payload("controller", our_nonce);
        if let Some(key) = &self.agent_key {
            return match &proof.hmac {
                Some(hmac) if key.verifies(&text, hmac) => Ok(()),
                _ => Err("the controller did not prove it holds the agents' key: not our controller".into()),
            };
        }
        let credential = proof.munge.as_deref().ok_or("the controller sent no MUNGE credential: not our controller")?;
        let who = self.munge()?.decode(credential).map_err(|e| format!("the controller's credential: {e}"))?;
        if who.uid != 0 || who.payload != text {
            return Err(format!(
                "the controller's credential is uid {}'s or for another connection: not our controller",
                who.uid
            ));
        }
        Ok(())
    }

    /// Whose request this is: the uid and gid of a MUNGE credential made for this connection's `nonce`.
    pub fn check_user(&self, credential: &str, nonce: &str) -> Result<(u32, u32), String> {
        let who = self.munge()?.decode(credential).map_err(|e| e.to_string())?;
        if who.payload != bound_payload("user", nonce) {
            return Err("the credential was made for another connection or purpose".into());
        }
        Ok((who.uid, who.gid))
    }

    /// Is the peer an agent for `node`: root in the MUNGE realm, or a holder of the agents' key?
    pub fn check_agent(&self, node: &str, proof: &AgentProof, nonce: &str) -> Result<(), String> {
        let text = agent_text(node, nonce);
        match proof {
            AgentProof::Hmac(hex) => match &self.agent_key {
                Some(key) if key.verifies(&text, hex) => Ok(()),
                Some(_) => Err("wrong key".into()),
                None => Err("this controller takes no agent key: prove with MUNGE".into()),
            },
            AgentProof::Munge(credential) => {
                let who = self.munge()?.decode(credential).map_err(|e| e.to_string())?;
                if who.payload != text {
                    return Err("the credential was made for another connection, node or purpose".into());
                }
                if who.uid != 0 {
                    return Err(format!("agents run as root; this credential is uid {}'s", who.uid));
                }
                Ok(())
            }
        }
    }

    /// This agent's proof for `node` over the controller's `nonce`: the key's HMAC when we have one, else MUNGE.
    pub fn agent_proof(&self, node: &str, nonce: &str) -> Result<AgentProof, String> {
        let text = agent_text(node, nonce);
        match &self.agent_key {
            Some(key) => Ok(AgentProof::Hmac(key.sign(&text))),
            None => self.munge()?.encode_for(&text, CONTROLLER_UID).map(AgentProof::Munge).map_err(|e| e.to_string()),
        }
    }

    /// A user's credential over the controller's `nonce`.
    pub fn user_credential(&self, nonce: &str) -> Result<String, String> {
        self.munge()?.encode_for(&bound_payload("user", nonce), CONTROLLER_UID).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_file(mode: u32, text: &str) -> tempfile::NamedTempFile {
        use std::os::unix::fs::PermissionsExt;
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        file
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";

    #[test]
    fn a_key_file_others_can_read_or_that_is_short_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("key file ownership checks", "need root (the file must be root's)");
            return;
        }
        assert!(AgentKey::load(key_file(0o600, KEY).path()).is_ok());
        assert!(AgentKey::load(key_file(0o400, KEY).path()).is_ok());
        for mode in [0o644, 0o640, 0o604, 0o660] {
            let refused = AgentKey::load(key_file(mode, KEY).path()).err().unwrap();
            assert!(refused.contains("chmod 600"), "{mode:o}: {refused}");
        }
        assert!(AgentKey::load(key_file(0o600, "short\n").path()).err().unwrap().contains("at least 32"));
        let foreign = key_file(0o600, KEY);
        nix::unistd::chown(foreign.path(), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        assert!(AgentKey::load(foreign.path()).err().unwrap().contains("chown root"));
    }

    #[test]
    fn proofs_are_bound_to_their_purpose_node_and_nonce() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("key file ownership checks", "need root (the file must be root's)");
            return;
        }
        let key = Arc::new(AgentKey::load(key_file(0o600, KEY).path()).unwrap());
        let ours = Credentials { munge: None, agent_key: Some(key) };
        let proof = ours.agent_proof("n1", "aa").unwrap();
        assert!(ours.check_agent("n1", &proof, "aa").is_ok());
        assert!(ours.check_agent("n2", &proof, "aa").is_err(), "another node");
        assert!(ours.check_agent("n1", &proof, "bb").is_err(), "another connection");
        // The controller's proof over a nonce is not an agent's proof over it, and the reverse.
        let controller = ours.prove_controller("cc".into(), Some("aa")).unwrap();
        assert!(ours.check_controller(&controller, "aa").is_ok());
        assert!(ours.check_controller(&controller, "bb").is_err());
        let AgentProof::Hmac(agent_hex) = proof else { panic!() };
        let reflected = ControllerProof { hmac: Some(agent_hex), ..controller };
        assert!(ours.check_controller(&reflected, "aa").is_err());
        let other = Credentials {
            munge: None,
            agent_key: Some(Arc::new(AgentKey::load(key_file(0o600, &KEY.replace('0', "1")).path()).unwrap())),
        };
        assert!(ours.check_agent("n1", &other.agent_proof("n1", "aa").unwrap(), "aa").is_err(), "another key");
    }

    #[test]
    fn peer_nonces_are_short_hex() {
        assert!(check_peer_nonce("00ff").is_ok());
        for bad in ["", "xyz", "a:b", &"a".repeat(MAX_NONCE_CHARS + 1)] {
            assert!(check_peer_nonce(bad).is_err(), "{bad:?}");
        }
        assert_eq!(decode_hex("0g"), None);
        assert_eq!(decode_hex("0"), None);
    }
}
