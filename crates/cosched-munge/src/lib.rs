//! MUNGE credentials: the HPC convention for identity between hosts (Slurm's default).
//!
//! A process asks the munged of its own host for a credential; munged writes the process's uid and gid into it
//! (it learns them from the kernel, not from the process) and seals it with the key every host of the realm
//! shares. Any host of the realm can then ask its own munged whether a credential is valid and whose it is; each
//! credential decodes once (munged keeps a replay cache) and expires after a few minutes. So a remote request's
//! uid comes from a credential, never from what the client claims.
//!
//! cosched binds every credential to one connection: the payload names a purpose and the peer's fresh nonce
//! (`cosched-user:<nonce>`), so cosched takes a credential seen on the wire nowhere else; and each is restricted to
//! the uid of its one recipient ([`Munge::encode_for`]), so no other service of the realm can decode it either.
//!
//! libmunge is loaded at run time ([`Munge::open`]), so building and simulating never need MUNGE installed.

// Talking to a daemon takes real time: the workspace's clock bans protect the simulator's determinism.
#![allow(clippy::disallowed_methods)]

mod ffi;
pub mod testing;

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// Longer credentials are refused before munged sees them (ours carry a payload of under 100 bytes and are
/// about 200 bytes long).
pub const MAX_CREDENTIAL_BYTES: usize = 4096;

/// A connection to MUNGE: libmunge and the socket of the local munged.
pub struct Munge {
    api: ffi::Api,
    socket: Option<CString>,
    socket_path: Option<PathBuf>,
}

/// Who a valid credential stands for, as munged vouched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub payload: Vec<u8>,
    /// The host whose munged made the credential.
    pub origin: std::net::Ipv4Addr,
}

/// Why MUNGE could not encode or decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MungeError {
    /// libmunge's error number (`EMUNGE_*`), 0 when the library itself is missing.
    pub code: i32,
    pub message: String,
}

impl std::fmt::Display for MungeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MungeError {}

impl Munge {
    /// Load libmunge; `socket` is the local munged's socket (`None`: libmunge's default,
    /// `/run/munge/munge.socket.2`). Nothing is asked of munged yet: see [`Munge::check`].
    pub fn open(socket: Option<&Path>) -> Result<Munge, MungeError> {
        let missing = |message: String| MungeError {
            code: 0,
            message: format!("{message} (install MUNGE: Debian's packages munge and libmunge2)"),
        };
        let api = ffi::Api::load().map_err(missing)?;
        let socket_c = socket.map(ffi::c_path).transpose().map_err(|message| MungeError { code: 2, message })?;
        Ok(Munge { api, socket: socket_c, socket_path: socket.map(Path::to_path_buf) })
    }

    /// The socket in use, for messages.
    pub fn socket_name(&self) -> String {
        self.socket_path.as_ref().map_or("munged's default socket".into(), |p| p.display().to_string())
    }

    /// A credential for this process's uid and gid that carries `payload`, which any process of the realm may
    /// decode.
    pub fn encode(&self, payload: &[u8]) -> Result<String, MungeError> {
        self.api.encode(self.socket.as_deref(), payload, None).map_err(|e| self.error("encoding a credential", e))
    }

    /// As [`Munge::encode`], but only a process of `decoder_uid` may decode it (munged refuses every other uid, as
    /// Slurm restricts its messages to their recipient): a credential of root handed to a peer that has not
    /// proved who it is stays useless to any other service of the realm.
    pub fn encode_for(&self, payload: &[u8], decoder_uid: u32) -> Result<String, MungeError> {
        let encoded = self.api.encode(self.socket.as_deref(), payload, Some(decoder_uid));
        encoded.map_err(|e| self.error("encoding a credential", e))
    }

    /// Whose `credential` is, if munged finds it valid (sealed with the realm's key, not expired, never decoded
    /// before). A credential of more than [`MAX_CREDENTIAL_BYTES`] or with a NUL byte is refused unread.
    pub fn decode(&self, credential: &str) -> Result<Identity, MungeError> {
        if credential.len() > MAX_CREDENTIAL_BYTES {
            return Err(MungeError {
                code: 3,
                message: format!("credential longer than {MAX_CREDENTIAL_BYTES} bytes"),
            });
        }
        let text = CString::new(credential)
            .map_err(|_| MungeError { code: 8, message: "credential contains a NUL byte".into() })?;
        let decoded =
            self.api.decode(self.socket.as_deref(), &text).map_err(|e| self.error("decoding a credential", e))?;
        Ok(Identity {
            uid: decoded.uid,
            gid: decoded.gid,
            payload: decoded.payload,
            origin: std::net::Ipv4Addr::from(decoded.origin_ipv4),
        })
    }

    /// Encode and decode one credential: munged runs, answers on our socket and holds a usable key.
    pub fn check(&self) -> Result<(), MungeError> {
        let credential = self.encode(b"cosched-check")?;
        self.decode(&credential).map(drop)
    }

    fn error(&self, action: &str, e: ffi::CallError) -> MungeError {
        MungeError { code: e.code, message: format!("MUNGE ({}): {action}: {}", self.socket_name(), e.message) }
    }
}

/// The payload that binds a credential to one purpose and one peer's nonce.
pub fn bound_payload(purpose: &str, nonce: &str) -> Vec<u8> {
    format!("cosched-{purpose}:{nonce}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn munged() -> testing::PrivateMunged {
        testing::PrivateMunged::start().expect("a private munged (scripts/setup installs munge)")
    }

    #[test]
    fn a_credential_carries_the_callers_uid_and_payload_and_decodes_once() {
        let daemon = munged();
        let munge = daemon.client().unwrap();
        let credential = munge.encode(b"cosched-user:abc").unwrap();
        assert!(credential.starts_with("MUNGE:"), "{credential}");
        let who = munge.decode(&credential).unwrap();
        assert_eq!((who.uid, who.gid), (nix_uid(), nix_gid()));
        assert_eq!(who.payload, b"cosched-user:abc");
        let again = munge.decode(&credential).unwrap_err();
        assert!(again.message.contains("eplayed"), "a second decode must be refused as a replay: {again}");
    }

    #[test]
    fn forged_and_oversized_credentials_are_refused() {
        let daemon = munged();
        let munge = daemon.client().unwrap();
        let credential = munge.encode(b"x").unwrap();
        let mut forged = credential.clone().into_bytes();
        let middle = forged.len() / 2;
        forged[middle] = if forged[middle] == b'A' { b'B' } else { b'A' };
        assert!(munge.decode(std::str::from_utf8(&forged).unwrap()).is_err());
        assert!(munge.decode("not a credential").is_err());
        assert!(munge.decode(&"M".repeat(MAX_CREDENTIAL_BYTES + 1)).unwrap_err().message.contains("longer"));
        assert!(munge.decode("MUNGE:\0").unwrap_err().message.contains("NUL"));
    }

    #[test]
    fn a_credential_of_another_realm_is_refused() {
        let (ours, theirs) = (munged(), munged());
        let foreign = theirs.client().unwrap().encode(b"x").unwrap();
        let refused = ours.client().unwrap().decode(&foreign).unwrap_err();
        assert!(refused.code != 0, "{refused}");
    }

    #[test]
    fn an_absent_munged_is_a_clear_error() {
        let munge = Munge::open(Some(Path::new("/nonexistent/munge.socket"))).unwrap();
        let error = munge.check().unwrap_err();
        assert!(error.message.contains("/nonexistent/munge.socket"), "{error}");
    }

    fn nix_uid() -> u32 {
        effective_id("Uid:")
    }

    fn nix_gid() -> u32 {
        effective_id("Gid:")
    }

    /// The effective id of a `Uid:` or `Gid:` line of /proc/self/status (real, effective, saved, filesystem).
    fn effective_id(field: &str) -> u32 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix(field)?.split_whitespace().nth(1)?.parse().ok())
            .unwrap()
    }
}
