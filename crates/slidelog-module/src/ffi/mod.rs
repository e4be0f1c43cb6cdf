//! Every `unsafe` line of the module: the server's C API (through
//! `valkey-module`'s raw bindings, resolved by `RedisModule_Init` into
//! function pointers) behind small safe wrappers, the module's entry point,
//! the command trampolines and the data type's callbacks.
//!
//! Rules kept here: only APIs that Redis 7.0 has are called (a newer one is
//! a null pointer there; the `api!` macro turns a missing one into a panic, which
//! every command body catches, never a call through null); every command
//! body runs under `catch_unwind` and a panic becomes an error reply
//! (unwinding into C is undefined behaviour and would take the server down);
//! pointers the server hands in live only for the call, and nothing here
//! keeps one beyond it except the data type's handle, registered once.
#![allow(unsafe_code)]

use crate::error::CommandError;
use slidelog_core::Log;
use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicPtr, Ordering};
use valkey_module::raw;

/// The data type's name in RDB files (exactly 9 characters).
const TYPE_NAME: &CStr = c"slide-log";
/// The RDB encoding version of a log: one string of `slidelog_core::codec`
/// (which carries its own version too). A file (or DUMP payload) of another
/// version fails to load, loudly.
pub const ENCODING_VERSION: c_int = 1;

const OK: c_int = raw::REDISMODULE_OK as c_int;
const ERR: c_int = raw::REDISMODULE_ERR as c_int;

/// The registered data type. Module-type callbacks take no user pointer, so
/// the handle is process state by necessity; it is written once, at load.
static LOG_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// An API function pointer, or a panic naming it when this server lacks it.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: the pointers are written once by RedisModule_Init, before
        // any command or callback runs, and only read afterwards.
        {
            #[allow(unused_unsafe)]
            let f = unsafe { raw::$name };
            f.expect(concat!(stringify!($name), " is missing on this server"))
        }
    };
}

/// One command call: the server's context and arguments.
pub struct Ctx {
    raw: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
}

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing.
    Empty,
    /// A module log.
    Log,
    /// A sorted set (a log the scripts wrote, until adopted).
    SortedSet,
    /// Anything else: WRONGTYPE.
    Other,
}

/// An open key (closed on drop).
pub struct Key<'a> {
    ctx: &'a Ctx,
    raw: *mut raw::RedisModuleKey,
    /// The key's name, one of the call's arguments (for what is replicated).
    name: *mut raw::RedisModuleString,
}

fn bytes_of<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `s` is a live string the server handed us for this call; the
    // returned pointer and length describe its buffer, valid as long as it.
    unsafe {
        let ptr = api!(RedisModule_StringPtrLen)(s, &mut len);
        if ptr.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
        }
    }
}

impl Ctx {
    /// The arguments after the command name (on the stack for a check of
    /// up to three limits).
    pub fn args(&self) -> smallvec::SmallVec<[&[u8]; 14]> {
        (1..self.argc)
            // SAFETY: argv holds argc live strings for the call.
            .map(|i| bytes_of(unsafe { *self.argv.add(i) }))
            .collect()
    }

    /// The server's clock, Unix ms (`RedisModule_Milliseconds`, since 4.0).
    pub fn server_ms(&self) -> u64 {
        // SAFETY: a plain function of no arguments.
        let ms = unsafe { api!(RedisModule_Milliseconds)() };
        u64::try_from(ms).unwrap_or(0)
    }

    /// Opens the call's key (argument 1) for reading, or reading and writing.
    pub fn open_key(&self, write: bool) -> Key<'_> {
        self.open_key_at(0, write)
    }

    /// Opens the key that is argument `at` after the command name (`0`: the
    /// first), for reading, or reading and writing.
    ///
    /// # Panics
    /// When the call has no such argument (a parser's bug: every caller's
    /// parser checked the arity first).
    pub fn open_key_at(&self, at: usize, write: bool) -> Key<'_> {
        assert!(
            at + 1 < self.argc,
            "argument {at} of {} opened as a key",
            self.argc
        );
        let mode = raw::REDISMODULE_READ | if write { raw::REDISMODULE_WRITE } else { 0 };
        // SAFETY: at + 1 < argc (checked above); argv[at + 1] is live for the call.
        let (raw, name) = unsafe {
            let name = *self.argv.add(at + 1);
            (
                api!(RedisModule_OpenKey)(self.raw, name, mode as c_int),
                name,
            )
        };
        Key {
            ctx: self,
            raw,
            name,
        }
    }

    fn string(&self, bytes: &[u8]) -> *mut raw::RedisModuleString {
        // SAFETY: copies `bytes`; the caller frees the string.
        unsafe { api!(RedisModule_CreateString)(self.raw, bytes.as_ptr().cast(), bytes.len()) }
    }

    /// Deletes the key named `name` (same slot as the call's key), if any.
    pub fn delete_named(&self, name: &[u8]) -> bool {
        let s = self.string(name);
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: `s` is ours; the key is closed and the string freed here.
        unsafe {
            let key = api!(RedisModule_OpenKey)(self.raw, s, mode);
            let existed = !key.is_null()
                && api!(RedisModule_KeyType)(key) != raw::REDISMODULE_KEYTYPE_EMPTY as c_int;
            if existed {
                api!(RedisModule_DeleteKey)(key);
            }
            if !key.is_null() {
                api!(RedisModule_CloseKey)(key);
            }
            api!(RedisModule_FreeString)(self.raw, s);
            existed
        }
    }

    /// Whether the key named `name` (same slot as the call's key) holds
    /// anything.
    pub fn exists_named(&self, name: &[u8]) -> bool {
        let s = self.string(name);
        // SAFETY: `s` is ours; the key is closed and the string freed here.
        unsafe {
            let key = api!(RedisModule_OpenKey)(self.raw, s, raw::REDISMODULE_READ as c_int);
            let exists = !key.is_null()
                && api!(RedisModule_KeyType)(key) != raw::REDISMODULE_KEYTYPE_EMPTY as c_int;
            if !key.is_null() {
                api!(RedisModule_CloseKey)(key);
            }
            api!(RedisModule_FreeString)(self.raw, s);
            exists
        }
    }

    /// Sets the key named `name` (same slot as the call's key) to `1`
    /// until `at_ms` (Unix ms), and propagates `SET <name> 1 PXAT <at_ms>`
    /// to replicas and the AOF (deterministic: an absolute time).
    pub fn mark_once(&self, name: &[u8], at_ms: u64) -> Result<(), CommandError> {
        let (s, one) = (self.string(name), self.string(b"1"));
        let at = i64::try_from(at_ms).unwrap_or(i64::MAX);
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: `s` and `one` are ours (freed here; StringSet copies the
        // value); the key is opened for writing and closed here; "bccl" is
        // a buffer and its length, two C strings and a long long.
        let set = unsafe {
            let key = api!(RedisModule_OpenKey)(self.raw, s, mode);
            let set = !key.is_null()
                && api!(RedisModule_StringSet)(key, one) == OK
                && api!(RedisModule_SetAbsExpire)(key, at) == OK;
            if !key.is_null() {
                api!(RedisModule_CloseKey)(key);
            }
            if set {
                api!(RedisModule_Replicate)(
                    self.raw,
                    c"SET".as_ptr(),
                    c"bccl".as_ptr(),
                    name.as_ptr(),
                    name.len(),
                    c"1".as_ptr(),
                    c"PXAT".as_ptr(),
                    at as std::ffi::c_longlong,
                );
            }
            api!(RedisModule_FreeString)(self.raw, one);
            api!(RedisModule_FreeString)(self.raw, s);
            set
        };
        if set {
            Ok(())
        } else {
            Err(CommandError::Internal("could not set the once key".into()))
        }
    }

    /// Propagates `SLIDELOG.APPLY <key> <change>` (`crate::args::change`)
    /// for the call's key to replicas and the AOF, in place of this call
    /// (which may have read the clock).
    pub fn replicate_apply(&self, change: &[u8]) {
        // SAFETY: argv[1] is the call's key, live for the call.
        self.replicate_apply_to(unsafe { *self.argv.add(1) }, change);
    }

    /// [`Self::replicate_apply`] for the key `name` (one of the call's
    /// arguments). Several in one command reach replicas and the AOF as one
    /// `MULTI`/`EXEC` (the server wraps a command's propagated commands).
    fn replicate_apply_to(&self, name: *mut raw::RedisModuleString, change: &[u8]) {
        // SAFETY: "sb" is the key string, then a buffer and its length; the
        // server copies both. `name` is one of the call's live arguments.
        unsafe {
            api!(RedisModule_Replicate)(
                self.raw,
                c"SLIDELOG.APPLY".as_ptr(),
                c"sb".as_ptr(),
                name,
                change.as_ptr(),
                change.len(),
            );
        }
    }

    /// Whether this call came from the primary's replication link or from an
    /// AOF being loaded (`RedisModule_GetContextFlags`, both flags since
    /// Redis 6.0): the only sources of a genuine `SLIDELOG.APPLY`.
    pub fn is_replicated_or_loading(&self) -> bool {
        // SAFETY: a live context.
        let flags = unsafe { api!(RedisModule_GetContextFlags)(self.raw) } as u32;
        flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
    }

    /// Propagates this call as it came (deterministic commands only).
    pub fn replicate_verbatim(&self) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.raw) };
    }
}

impl Key<'_> {
    /// Propagates `SLIDELOG.APPLY <this key> <change>` (see
    /// [`Ctx::replicate_apply`]).
    pub fn replicate_apply(&self, change: &[u8]) {
        self.ctx.replicate_apply_to(self.name, change);
    }

    /// What the key holds.
    pub fn kind(&self) -> Kind {
        // SAFETY: an open key.
        let t = unsafe { api!(RedisModule_KeyType)(self.raw) } as isize;
        match t {
            raw::REDISMODULE_KEYTYPE_EMPTY => Kind::Empty,
            raw::REDISMODULE_KEYTYPE_ZSET => Kind::SortedSet,
            raw::REDISMODULE_KEYTYPE_MODULE => {
                // SAFETY: an open key of a module type.
                let ty = unsafe { api!(RedisModule_ModuleTypeGetType)(self.raw) };
                if ty == LOG_TYPE.load(Ordering::Acquire) {
                    Kind::Log
                } else {
                    Kind::Other
                }
            }
            _ => Kind::Other,
        }
    }

    /// The log this key holds, if it is one.
    pub fn log_mut(&mut self) -> Option<&mut Log> {
        if self.kind() != Kind::Log {
            return None;
        }
        // SAFETY: a key of our type holds a `Box<Log>` made by `set_log`,
        // `rdb_load` or `copy`; the key is open for this call only and the
        // server runs one command at a time, so nothing else touches it.
        unsafe {
            let ptr = api!(RedisModule_ModuleTypeGetValue)(self.raw).cast::<Log>();
            ptr.as_mut()
        }
    }

    /// Replaces whatever the key holds with `log` (its TTL is dropped: set it after).
    pub fn set_log(&mut self, log: Log) -> Result<(), CommandError> {
        let ptr = Box::into_raw(Box::new(log));
        // SAFETY: the key is open for writing; on success the server owns
        // the box (freed by `free`), on failure it is taken back here.
        let status = unsafe {
            api!(RedisModule_ModuleTypeSetValue)(
                self.raw,
                LOG_TYPE.load(Ordering::Acquire),
                ptr.cast(),
            )
        };
        if status != OK {
            // SAFETY: the server did not take it.
            drop(unsafe { Box::from_raw(ptr) });
            return Err(CommandError::Internal("could not store the log".into()));
        }
        Ok(())
    }

    /// The sorted set's `(member, score)` entries, by score.
    pub fn sorted_set_entries(&self) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::new();
        // SAFETY: the key holds a sorted set; the range is stopped before
        // return and every element string is freed after it is copied.
        unsafe {
            let (lo, hi) = (f64::NEG_INFINITY, f64::INFINITY);
            if api!(RedisModule_ZsetFirstInScoreRange)(self.raw, lo, hi, 0, 0) != OK {
                return out;
            }
            while api!(RedisModule_ZsetRangeEndReached)(self.raw) == 0 {
                let mut score = 0.0;
                let element = api!(RedisModule_ZsetRangeCurrentElement)(self.raw, &mut score);
                if element.is_null() {
                    break;
                }
                out.push((bytes_of(element).to_vec(), score));
                api!(RedisModule_FreeString)(self.ctx.raw, element);
                if api!(RedisModule_ZsetRangeNext)(self.raw) == 0 {
                    break;
                }
            }
            api!(RedisModule_ZsetRangeStop)(self.raw);
        }
        out
    }

    /// Deletes the key.
    pub fn delete(&mut self) {
        // SAFETY: an open key (a no-op on an empty one).
        unsafe { api!(RedisModule_DeleteKey)(self.raw) };
    }

    /// Sets the key's absolute expiry, Unix ms (`RedisModule_SetAbsExpire`, 6.2.2+).
    pub fn set_expire_at(&mut self, at_ms: u64) {
        let at = i64::try_from(at_ms).unwrap_or(i64::MAX);
        // SAFETY: an open key that holds a value.
        unsafe { api!(RedisModule_SetAbsExpire)(self.raw, at) };
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        // SAFETY: opened by `open_key`, closed once.
        unsafe { api!(RedisModule_CloseKey)(self.raw) };
    }
}

mod entry;
