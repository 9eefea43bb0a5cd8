//! The crate's only `unsafe`: libmunge's C API, loaded with dlopen. Each call is a thin wrapper that owns the
//! context it creates and frees what libmunge allocated for it.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// The shared library's name in Debian's `libmunge2` (and every other distribution's).
const LIBRARY: &str = "libmunge.so.2";

// From <munge.h>.
const MUNGE_OPT_ADDR4: c_int = 5;
const MUNGE_OPT_SOCKET: c_int = 8;
const MUNGE_OPT_UID_RESTRICTION: c_int = 9;
const EMUNGE_SUCCESS: c_int = 0;

type Context = *mut c_void;
type Encode = unsafe extern "C" fn(*mut *mut c_char, Context, *const c_void, c_int) -> c_int;
type Decode = unsafe extern "C" fn(*const c_char, Context, *mut *mut c_void, *mut c_int, *mut u32, *mut u32) -> c_int;
type ContextCreate = unsafe extern "C" fn() -> Context;
type ContextDestroy = unsafe extern "C" fn(Context);
type ContextError = unsafe extern "C" fn(Context) -> *const c_char;
type ContextOption = unsafe extern "C" fn(Context, c_int, ...) -> c_int;
type ErrorText = unsafe extern "C" fn(c_int) -> *const c_char;

/// libmunge's functions, valid as long as `_library` is loaded (it is never unloaded before them).
pub struct Api {
    encode: Encode,
    decode: Decode,
    context_create: ContextCreate,
    context_destroy: ContextDestroy,
    context_error: ContextError,
    context_set: ContextOption,
    context_get: ContextOption,
    error_text: ErrorText,
    _library: libloading::Library,
}

/// What a decoded credential says, as munged vouched for it.
pub struct Decoded {
    pub uid: u32,
    pub gid: u32,
    pub payload: Vec<u8>,
    /// The IPv4 address of the host whose munged encoded it (network byte order).
    pub origin_ipv4: [u8; 4],
}

/// A failed call: libmunge's error number and its message.
pub struct CallError {
    pub code: i32,
    pub message: String,
}

impl Api {
    pub fn load() -> Result<Api, String> {
        // SAFETY: loading libmunge runs no initialisers with preconditions; the symbols are looked up by their
        // documented names and given their prototypes from <munge.h>.
        unsafe {
            let library = libloading::Library::new(LIBRARY).map_err(|e| format!("cannot load {LIBRARY}: {e}"))?;
            let symbol = |name: &[u8]| -> Result<*const c_void, String> {
                let found = library.get::<*const c_void>(name).map_err(|e| format!("{LIBRARY}: {e}"))?;
                if found.is_null() {
                    return Err(format!("{LIBRARY}: {} is null", String::from_utf8_lossy(name)));
                }
                Ok(*found)
            };
            Ok(Api {
                encode: std::mem::transmute::<*const c_void, Encode>(symbol(b"munge_encode\0")?),
                decode: std::mem::transmute::<*const c_void, Decode>(symbol(b"munge_decode\0")?),
                context_create: std::mem::transmute::<*const c_void, ContextCreate>(symbol(b"munge_ctx_create\0")?),
                context_destroy: std::mem::transmute::<*const c_void, ContextDestroy>(symbol(b"munge_ctx_destroy\0")?),
                context_error: std::mem::transmute::<*const c_void, ContextError>(symbol(b"munge_ctx_strerror\0")?),
                context_set: std::mem::transmute::<*const c_void, ContextOption>(symbol(b"munge_ctx_set\0")?),
                context_get: std::mem::transmute::<*const c_void, ContextOption>(symbol(b"munge_ctx_get\0")?),
                error_text: std::mem::transmute::<*const c_void, ErrorText>(symbol(b"munge_strerror\0")?),
                _library: library,
            })
        }
    }

    /// A credential for the calling process's uid and gid carrying `payload`, from the munged at `socket`
    /// (libmunge's default when `None`); with `decoder_uid`, only a process of that uid may decode it.
    pub fn encode(&self, socket: Option<&CStr>, payload: &[u8], decoder_uid: Option<u32>) -> Result<String, CallError> {
        let length =
            c_int::try_from(payload.len()).map_err(|_| CallError { code: 3, message: "payload too long".into() })?;
        let context = self.context(socket)?;
        if let Some(uid) = decoder_uid {
            // SAFETY: MUNGE_OPT_UID_RESTRICTION takes one `uid_t` (u32 on Linux).
            let code = unsafe { (self.context_set)(context.0, MUNGE_OPT_UID_RESTRICTION, uid as libc::uid_t) };
            if code != EMUNGE_SUCCESS {
                return Err(self.call_error(code, &context));
            }
        }
        let mut credential: *mut c_char = std::ptr::null_mut();
        // SAFETY: `context` is live; `payload` is valid for `length` bytes; libmunge sets `credential` to a
        // NUL-terminated string from malloc, which we copy and free.
        let result = unsafe {
            let code = (self.encode)(&mut credential, context.0, payload.as_ptr().cast(), length);
            let text = (!credential.is_null()).then(|| CStr::from_ptr(credential).to_string_lossy().into_owned());
            libc::free(credential.cast());
            if code == EMUNGE_SUCCESS {
                text.ok_or_else(|| CallError { code: 1, message: "munge_encode gave no credential".into() })
            } else {
                Err(self.call_error(code, &context))
            }
        };
        drop(context);
        result
    }

    /// Ask the munged at `socket` whether `credential` is valid, and what it says.
    pub fn decode(&self, socket: Option<&CStr>, credential: &CStr) -> Result<Decoded, CallError> {
        let context = self.context(socket)?;
        let mut payload: *mut c_void = std::ptr::null_mut();
        let mut length: c_int = 0;
        let (mut uid, mut gid) = (u32::MAX, u32::MAX);
        let mut address = [0u8; 4];
        // SAFETY: every out-pointer is live and of the type <munge.h> names (uid_t and gid_t are u32 on Linux,
        // struct in_addr is 4 bytes); libmunge may allocate `payload` even on failure, so it is freed either way.
        unsafe {
            let code = (self.decode)(credential.as_ptr(), context.0, &mut payload, &mut length, &mut uid, &mut gid);
            let bytes = if payload.is_null() || length <= 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(payload.cast::<u8>(), length as usize).to_vec()
            };
            libc::free(payload);
            if code != EMUNGE_SUCCESS {
                return Err(self.call_error(code, &context));
            }
            (self.context_get)(context.0, MUNGE_OPT_ADDR4, address.as_mut_ptr());
            Ok(Decoded { uid, gid, payload: bytes, origin_ipv4: address })
        }
    }

    fn context(&self, socket: Option<&CStr>) -> Result<OwnedContext<'_>, CallError> {
        // SAFETY: munge_ctx_create has no preconditions; a null result is checked.
        let raw = unsafe { (self.context_create)() };
        if raw.is_null() {
            return Err(CallError { code: 5, message: "munge_ctx_create failed (out of memory)".into() });
        }
        let context = OwnedContext(raw, self);
        if let Some(path) = socket {
            // SAFETY: MUNGE_OPT_SOCKET takes one `const char *`, which libmunge copies.
            let code = unsafe { (self.context_set)(context.0, MUNGE_OPT_SOCKET, path.as_ptr()) };
            if code != EMUNGE_SUCCESS {
                return Err(self.call_error(code, &context));
            }
        }
        Ok(context)
    }

    /// The context's own message (it names the socket and the cause), else the generic one for `code`.
    fn call_error(&self, code: c_int, context: &OwnedContext<'_>) -> CallError {
        // SAFETY: both functions return NULL or a NUL-terminated string owned by libmunge, copied at once.
        let message = unsafe {
            let specific = (self.context_error)(context.0);
            let text = if specific.is_null() { (self.error_text)(code) } else { specific };
            if text.is_null() {
                format!("MUNGE error {code}")
            } else {
                CStr::from_ptr(text).to_string_lossy().into_owned()
            }
        };
        CallError { code, message }
    }
}

/// A munge context, destroyed when dropped.
struct OwnedContext<'a>(Context, &'a Api);

impl Drop for OwnedContext<'_> {
    fn drop(&mut self) {
        // SAFETY: the context came from munge_ctx_create and is destroyed once.
        unsafe { (self.1.context_destroy)(self.0) }
    }
}

/// A path as libmunge wants it.
pub fn c_path(path: &std::path::Path) -> Result<CString, String> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("{} contains a NUL byte", path.display()))
}
