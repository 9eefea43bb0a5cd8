//! Who is at the other end of a TCP connection, proved, never claimed (see `docs/security.md`, "Identity").
//!
//! One handshake for every TCP peer, whether it proves itself with MUNGE or with the agents' key:
//!
//! 1. the peer sends its nonce (`challenge`); the controller answers with its own, and nothing else;
//! 2. the peer proves who it is (`auth` for a user, `agent_auth` for an agent);
//! 3. only then does the controller prove itself, and from then on every line, both ways, is sealed (`seal`) with
//!    a session key that only the two of them can compute.
//!
//! Every proof binds both nonces, its direction (peer to controller, or controller to peer) and both parties (the
//! agent's node or the user's uid, and the controller), so a proof is worth nothing on another connection, for
//! another node or user, or sent back the other way. A relay between two honest parties — a user who bound the
//! address an agent dials — can pass the handshake on, but not compute the session key: with the agents' key it
//! is an HMAC under that key over both nonces and the agent's node; with MUNGE it comes from a fresh secret the
//! peer put in its credential, which only root can decode. So the relay gains nothing but a wire.
//!
//! The controller proves nothing before the peer has: a controller that answered challenges with a credential of
//! root would hand every unauthenticated peer a root credential of the realm, which a service that trusts a
//! credential's uid without reading its payload would accept. Every MUNGE credential is restricted to its one
//! recipient: the peers' to root (the controller), the controller's to the uid of the peer that proved itself, as
//! Slurm restricts its own. The agents' key never crosses the network, and every comparison of a secret is in
//! constant time.

pub mod monitor_tokens;

use crate::wire::protocol::{AgentProof, ControllerProof, MAX_NONCE_CHARS};
use crate::wire::seal::SessionKey;
use cosched_munge::{bound_payload, Munge};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path;
use std::sync::Arc;

/// The shortest key accepted, in hex digits: 256 bits (`openssl rand -hex 32`). Hex only, so that a passphrase
/// of that many characters, far weaker, is refused.
pub const MIN_KEY_HEX_DIGITS: usize = 64;
/// The controller runs as root: only root may decode the credentials its peers make for it.
pub const CONTROLLER_UID: u32 = 0;
/// The largest key file read: a key is a line of hex.
const MAX_KEY_FILE_BYTES: u64 = 4096;
/// Agents run as root too: the controller's proof to an agent is for root's decoding.
pub const AGENT_UID: u32 = 0;

/// The agents' shared key, read from a file that only root may read.
pub struct AgentKey {
    key: Vec<u8>,
}

impl AgentKey {
    /// Read the key, refusing a file that is not root's, not a regular file, open to group or others, in a folder
    /// others may change, or not at least [`MIN_KEY_HEX_DIGITS`] hex digits.
    pub fn load(path: &Path) -> Result<AgentKey, String> {
        use std::os::unix::fs::MetadataExt;
        let at =
            |e: std::io::Error| format!("key file: {}", cosched_files::said(path, &e, cosched_files::LastLink::Refuse));
        // Folders only root can change, and no link at the last step: a user who could swap the file, or a link to
        // it, could make root take a key of theirs.
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        crate::private_dir::check_existing(folder, "the key file's folder").map_err(|e| e.to_string())?;
        // Every check is of the file opened, never of the path, and before it is opened for reading.
        let (file, meta) = cosched_files::open_regular(path, cosched_files::LastLink::Refuse).map_err(at)?;
        if cosched_files::owner_is_the_servers_word(&file).map_err(at)? {
            return Err(format!("key file {}: on FUSE, whose owners and modes are its server's word", path.display()));
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
        let text = cosched_files::read_bounded(file, MAX_KEY_FILE_BYTES).map_err(at)?;
        let key = text.trim_ascii().to_vec();
        let all_hex = key.iter().all(u8::is_ascii_hexdigit);
        if key.len() < MIN_KEY_HEX_DIGITS || !all_hex {
            return Err(format!(
                "key file {}: the key must be one line of at least {MIN_KEY_HEX_DIGITS} hex digits, {} random bytes \
                 (openssl rand -hex {}); it has {} characters{}",
                path.display(),
                MIN_KEY_HEX_DIGITS / 2,
                MIN_KEY_HEX_DIGITS / 2,
                key.len(),
                if all_hex { "" } else { ", not all hex digits" }
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

    /// The session key of the agent `party`'s connection over `nonces`.
    fn session_key(&self, party: Party, nonces: &Nonces) -> SessionKey {
        SessionKey::derive(&self.key, &statement(SESSION, party, nonces))
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

/// The two nonces of one TCP handshake: the peer's, sent with its challenge, and the controller's, its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nonces {
    pub peer: String,
    pub controller: String,
}

/// Who the controller's other party is, as the proofs and the session key name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Party<'a> {
    /// The agent of this node.
    Agent(&'a str),
    /// A user, whose uid is the one munged seals into the user's credential (so the user's own proof need not
    /// name it, and a process whose uid its munged sees otherwise, in a user namespace, still authenticates).
    User,
    /// The user of this uid, as the controller's proof names it.
    UserUid(u32),
}

impl std::fmt::Display for Party<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Party::Agent(node) => write!(f, "agent {node}"),
            Party::User => f.write_str("user"),
            Party::UserUid(uid) => write!(f, "user {uid}"),
        }
    }
}

/// What one proof says: who proves it to whom (its purpose), the party other than the controller, and both
/// nonces. Node names and nonces hold no `:`, so no two different statements have the same text.
fn statement(purpose: &str, party: Party, nonces: &Nonces) -> Vec<u8> {
    bound_payload(purpose, &format!("{party}:{}:{}", nonces.peer, nonces.controller))
}

const PEER_TO_CONTROLLER: &str = "to-controller";
const CONTROLLER_TO_PEER: &str = "to-peer";
const SESSION: &str = "session";

/// How many random bytes a peer puts in its MUNGE credential as the session's secret.
const SESSION_SECRET_BYTES: usize = 32;

/// How an agent proved itself, which is how the controller proves itself back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProvedWith {
    Key,
    Munge,
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

    // ---- the peer's side ----

    /// This agent's proof for `node` (the key's HMAC when we have one, else a MUNGE credential only root can
    /// decode, carrying the session's secret) and the connection's session key.
    pub fn prove_agent(&self, node: &str, nonces: &Nonces) -> Result<(AgentProof, SessionKey), String> {
        let party = Party::Agent(node);
        match &self.agent_key {
            Some(key) => {
                let proof = key.sign(&statement(PEER_TO_CONTROLLER, party, nonces));
                Ok((AgentProof::Hmac(proof), key.session_key(party, nonces)))
            }
            None => {
                let (credential, session) = self.munge_with_secret(party, nonces)?;
                Ok((AgentProof::Munge(credential), session))
            }
        }
    }

    /// A remote user's credential over this connection's nonces, carrying the session's secret, and the
    /// connection's session key.
    pub fn prove_user(&self, nonces: &Nonces) -> Result<(String, SessionKey), String> {
        self.munge_with_secret(Party::User, nonces)
    }

    /// A MUNGE credential for the controller's decoding only, stating that `party` proves itself over `nonces`
    /// and carrying a fresh secret; the session key made from that secret.
    fn munge_with_secret(&self, party: Party, nonces: &Nonces) -> Result<(String, SessionKey), String> {
        let secret = crate::job_tag::random_hex(SESSION_SECRET_BYTES).map_err(|e| format!("no random secret: {e}"))?;
        let mut payload = statement(PEER_TO_CONTROLLER, party, nonces);
        payload.extend_from_slice(format!(":{secret}").as_bytes());
        let credential = self.munge()?.encode_for(&payload, CONTROLLER_UID).map_err(|e| e.to_string())?;
        Ok((credential, SessionKey::derive(secret.as_bytes(), &statement(SESSION, party, nonces))))
    }

    /// Check the controller's proof to the agent of `node`: the key's HMAC when we have the key, else a MUNGE
    /// credential of root.
    pub fn check_controller_to_agent(
        &self,
        node: &str,
        nonces: &Nonces,
        proof: &ControllerProof,
    ) -> Result<(), String> {
        self.check_controller(Party::Agent(node), nonces, proof)
    }

    /// Check the controller's proof to the user of `uid` (a MUNGE credential of root).
    pub fn check_controller_to_user(&self, uid: u32, nonces: &Nonces, proof: &ControllerProof) -> Result<(), String> {
        self.check_controller(Party::UserUid(uid), nonces, proof)
    }

    fn check_controller(&self, party: Party, nonces: &Nonces, proof: &ControllerProof) -> Result<(), String> {
        let text = statement(CONTROLLER_TO_PEER, party, nonces);
        if let (Some(key), Party::Agent(_)) = (&self.agent_key, party) {
            return match &proof.hmac {
                Some(hmac) if key.verifies(&text, hmac) => Ok(()),
                _ => Err("the controller did not prove it holds the agents' key: not our controller".into()),
            };
        }
        let credential = proof.munge.as_deref().ok_or("the controller sent no MUNGE credential: not our controller")?;
        let who = self.munge()?.decode(credential).map_err(|e| format!("the controller's credential: {e}"))?;
        if who.uid != CONTROLLER_UID || who.payload != text {
            return Err(format!(
                "the controller's credential is uid {}'s or for another connection: not our controller",
                who.uid
            ));
        }
        Ok(())
    }

    // ---- the controller's side ----

    /// Is the peer the agent of `node` — a holder of the agents' key, or root in the MUNGE realm — proving itself
    /// over this connection's `nonces`? Its session key, and how it proved itself.
    pub fn check_agent(
        &self,
        node: &str,
        proof: &AgentProof,
        nonces: &Nonces,
    ) -> Result<(SessionKey, ProvedWith), String> {
        let party = Party::Agent(node);
        match proof {
            AgentProof::Hmac(hex) => match &self.agent_key {
                Some(key) if key.verifies(&statement(PEER_TO_CONTROLLER, party, nonces), hex) => {
                    Ok((key.session_key(party, nonces), ProvedWith::Key))
                }
                Some(_) => Err("wrong key".into()),
                None => Err("this controller takes no agent key: prove with MUNGE".into()),
            },
            AgentProof::Munge(credential) => {
                let (uid, _, session) = self.open_munge_with_secret(credential, party, nonces)?;
                if uid != AGENT_UID {
                    return Err(format!("agents run as root; this credential is uid {uid}'s"));
                }
                Ok((session, ProvedWith::Munge))
            }
        }
    }

    /// Whose connection this is: the uid and gid of a MUNGE credential made for this connection's `nonces`, and
    /// the session key from the secret it carries.
    pub fn check_user(&self, credential: &str, nonces: &Nonces) -> Result<(u32, u32, SessionKey), String> {
        self.open_munge_with_secret(credential, Party::User, nonces)
    }

    fn open_munge_with_secret(
        &self,
        credential: &str,
        party: Party,
        nonces: &Nonces,
    ) -> Result<(u32, u32, SessionKey), String> {
        let who = self.munge()?.decode(credential).map_err(|e| e.to_string())?;
        let mut expected = statement(PEER_TO_CONTROLLER, party, nonces);
        expected.push(b':');
        let secret = who
            .payload
            .strip_prefix(expected.as_slice())
            .filter(|s| s.len() == 2 * SESSION_SECRET_BYTES && s.iter().all(u8::is_ascii_hexdigit))
            .ok_or("the credential was made for another connection, node or purpose")?;
        Ok((who.uid, who.gid, SessionKey::derive(secret, &statement(SESSION, party, nonces))))
    }

    /// The controller's proof to the agent of `node`, which has proved itself `with` the key or MUNGE: the same
    /// way back (a MUNGE credential of root for root's decoding only, as agents run as root).
    pub fn prove_to_agent(&self, node: &str, nonces: &Nonces, with: ProvedWith) -> Result<ControllerProof, String> {
        let text = statement(CONTROLLER_TO_PEER, Party::Agent(node), nonces);
        match (with, &self.agent_key) {
            (ProvedWith::Key, Some(key)) => Ok(ControllerProof { hmac: Some(key.sign(&text)), munge: None }),
            (ProvedWith::Key, None) => Err("this controller has no agents' key".into()),
            (ProvedWith::Munge, _) => self.munge_proof(&text, AGENT_UID),
        }
    }

    /// The controller's proof to a user who has proved it is `uid`: a credential of root only that uid may decode.
    pub fn prove_to_user(&self, uid: u32, nonces: &Nonces) -> Result<ControllerProof, String> {
        self.munge_proof(&statement(CONTROLLER_TO_PEER, Party::UserUid(uid), nonces), uid)
    }

    fn munge_proof(&self, text: &[u8], peer_uid: u32) -> Result<ControllerProof, String> {
        let credential = self.munge()?.encode_for(text, peer_uid).map_err(|e| e.to_string())?;
        Ok(ControllerProof { munge: Some(credential), hmac: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key file in a folder of its own (a key straight in /tmp is refused: others may add names there).
    struct KeyFile {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
    }

    impl KeyFile {
        fn path(&self) -> &Path {
            &self.path
        }
    }

    fn key_file(mode: u32, text: &str) -> KeyFile {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agents.key");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        KeyFile { _dir: dir, path }
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
        assert!(AgentKey::load(key_file(0o600, "short\n").path()).err().unwrap().contains("at least 64 hex digits"));
        let passphrase = "correct horse battery staple, correct horse battery staple, again";
        assert!(AgentKey::load(key_file(0o600, passphrase).path()).err().unwrap().contains("not all hex digits"));
        let foreign = key_file(0o600, KEY);
        nix::unistd::chown(foreign.path(), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        assert!(AgentKey::load(foreign.path()).err().unwrap().contains("chown root"));
    }

    /// A link at the key's path, or a folder others may change, could hand root a key of a user's making.
    #[test]
    fn a_key_behind_a_link_or_in_a_folder_others_may_change_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("key file folder checks", "need root (the file must be root's)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("agents.key");
        std::fs::write(&key, KEY).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(AgentKey::load(&key).is_ok());
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&key, &link).unwrap();
        assert!(AgentKey::load(&link).err().unwrap().contains("is a symbolic link"));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(AgentKey::load(&key).err().unwrap().contains("writable by group or others"));
    }

    #[test]
    fn a_key_file_that_is_a_fifo_or_too_large_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No writer: a blocking open would wait here for ever.
        assert!(AgentKey::load(&fifo).err().unwrap().contains("not a regular file"));
        let large = key_file(0o600, &KEY.repeat(100));
        let refused = AgentKey::load(large.path()).err().unwrap();
        if nix::unistd::geteuid().is_root() {
            assert!(refused.contains("larger than 4096 bytes"), "{refused}");
        } else {
            assert!(refused.contains("chown root"), "{refused}");
        }
    }

    fn nonces(peer: &str, controller: &str) -> Nonces {
        Nonces { peer: peer.into(), controller: controller.into() }
    }

    /// Whether two session keys are the same: a line one end seals opens on the other.
    fn same_session(controller: SessionKey, peer: SessionKey) -> bool {
        use crate::wire::seal::{seal_both_ways, End};
        let (mut sealer, _) = seal_both_ways(controller, End::Controller);
        let (_, mut opener) = seal_both_ways(peer, End::Peer);
        opener.open(std::str::from_utf8(&sealer.seal(b"{}").unwrap()).unwrap().trim_end()).is_ok()
    }

    fn keyed(text: &str) -> Credentials {
        let key = Arc::new(AgentKey::load(key_file(0o600, text).path()).unwrap());
        Credentials { munge: None, agent_key: Some(key) }
    }

    #[test]
    fn a_key_proof_binds_the_node_both_nonces_and_its_direction() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("key proofs", "need root (the key file must be root's)");
            return;
        }
        let ours = keyed(KEY);
        let here = nonces("aa", "bb");
        let (proof, agents_session) = ours.prove_agent("n1", &here).unwrap();
        let (session, with) = ours.check_agent("n1", &proof, &here).unwrap();
        assert_eq!(with, ProvedWith::Key);
        assert!(same_session(session, agents_session));
        assert!(ours.check_agent("n2", &proof, &here).is_err(), "another node");
        for other in [nonces("ab", "bb"), nonces("aa", "bc"), nonces("bb", "aa")] {
            assert!(ours.check_agent("n1", &proof, &other).is_err(), "another connection: {other:?}");
        }
        let answer = ours.prove_to_agent("n1", &here, ProvedWith::Key).unwrap();
        assert!(ours.check_controller_to_agent("n1", &here, &answer).is_ok());
        assert!(ours.check_controller_to_agent("n2", &here, &answer).is_err(), "another node");
        assert!(ours.check_controller_to_agent("n1", &nonces("aa", "bc"), &answer).is_err(), "another connection");
        // Reflected: the agent's own proof handed back as the controller's, and the controller's as an agent's.
        let AgentProof::Hmac(agents_hex) = proof.clone() else { panic!("a key proof") };
        let reflected = ControllerProof { hmac: Some(agents_hex), munge: None };
        assert!(ours.check_controller_to_agent("n1", &here, &reflected).is_err(), "the agent's proof reflected");
        let controllers = AgentProof::Hmac(answer.hmac.clone().unwrap());
        assert!(ours.check_agent("n1", &controllers, &here).is_err(), "the controller's proof as an agent's");
        // Another key proves nothing, either way.
        let other = keyed(&KEY.replace('0', "1"));
        assert!(ours.check_agent("n1", &other.prove_agent("n1", &here).unwrap().0, &here).is_err());
        assert!(ours
            .check_controller_to_agent("n1", &here, &other.prove_to_agent("n1", &here, ProvedWith::Key).unwrap())
            .is_err());
    }

    #[test]
    fn each_connection_and_node_has_its_own_session_key() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("key sessions", "need root (the key file must be root's)");
            return;
        }
        let ours = keyed(KEY);
        let session = |node: &str, peer: &str| ours.prove_agent(node, &nonces(peer, "bb")).unwrap().1;
        assert!(same_session(session("n1", "aa"), session("n1", "aa")));
        assert!(!same_session(session("n1", "aa"), session("n1", "ab")), "another connection");
        assert!(!same_session(session("n1", "aa"), session("n2", "aa")), "another node");
    }

    #[test]
    fn a_munge_proof_binds_both_nonces_and_carries_a_secret_only_the_controller_reads() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("MUNGE proofs", "need root (credentials of root)");
            return;
        }
        let munged = cosched_munge::testing::PrivateMunged::start().expect("a private munged");
        let ours = Credentials { munge: Some(Arc::new(munged.client().unwrap())), agent_key: None };
        let here = nonces("aa", "bb");
        // A user (root here) proves itself; the controller learns the session's secret from the credential alone.
        let (credential, users_session) = ours.prove_user(&here).unwrap();
        assert!(!credential.contains(&format!("{users_session:?}")));
        let (uid, _, session) = ours.check_user(&credential, &here).unwrap();
        assert_eq!(uid, 0);
        assert!(same_session(session, users_session));
        for other in [nonces("ab", "bb"), nonces("aa", "bc"), nonces("bb", "aa")] {
            let (credential, _) = ours.prove_user(&here).unwrap();
            assert!(ours.check_user(&credential, &other).is_err(), "another connection: {other:?}");
        }
        // Roles do not swap: a user's credential makes no agent, an agent's no user.
        let (users, _) = ours.prove_user(&here).unwrap();
        assert!(ours.check_agent("n1", &AgentProof::Munge(users), &here).is_err());
        let (AgentProof::Munge(agents), agents_session) = ours.prove_agent("n1", &here).unwrap() else { panic!() };
        let (AgentProof::Munge(agents_again), _) = ours.prove_agent("n1", &here).unwrap() else { panic!() };
        assert!(ours.check_user(&agents, &here).is_err(), "an agent's credential as a user's");
        assert!(ours.check_agent("n2", &AgentProof::Munge(agents_again), &here).is_err(), "another node");
        let (AgentProof::Munge(agents), _) = ours.prove_agent("n1", &here).unwrap() else { panic!() };
        let (session, with) = ours.check_agent("n1", &AgentProof::Munge(agents), &here).unwrap();
        assert_eq!(with, ProvedWith::Munge);
        assert!(!same_session(session, agents_session), "each credential carries a secret of its own");
        // The controller's proof names the party and binds the nonces; a peer's credential is no controller's.
        let answer = ours.prove_to_user(0, &here).unwrap();
        assert!(ours.check_controller_to_user(0, &here, &answer).is_ok());
        let answer = ours.prove_to_user(0, &here).unwrap();
        assert!(ours.check_controller_to_user(0, &nonces("aa", "bc"), &answer).is_err(), "another connection");
        let answer = ours.prove_to_agent("n1", &here, ProvedWith::Munge).unwrap();
        assert!(ours.check_controller_to_user(0, &here, &answer).is_err(), "a proof to an agent is none to a user");
        let (reflected, _) = ours.prove_user(&here).unwrap();
        let reflected = ControllerProof { munge: Some(reflected), hmac: None };
        assert!(ours.check_controller_to_user(0, &here, &reflected).is_err(), "the user's credential reflected");
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
