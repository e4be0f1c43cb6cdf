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

use crate::commands::{self, Reply};
use crate::error::CommandError;
use slidelog_core::{Log, codec};
use std::ffi::{CStr, CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
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
        let mode = raw::REDISMODULE_READ | if write { raw::REDISMODULE_WRITE } else { 0 };
        // SAFETY: argc >= 2 is checked by every caller's argument parser
        // before a key is opened; argv[1] is live for the call.
        let raw = unsafe { api!(RedisModule_OpenKey)(self.raw, *self.argv.add(1), mode as c_int) };
        Key { ctx: self, raw }
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

    /// Propagates `SLIDELOG.APPLY <key> <change>` (`crate::args::change`)
    /// to replicas and the AOF, in place of this call (which may have read
    /// the clock).
    pub fn replicate_apply(&self, change: &[u8]) {
        // SAFETY: "sb" is the key string, then a buffer and its length; the
        // server copies both. argv[1] is the call's key.
        unsafe {
            api!(RedisModule_Replicate)(
                self.raw,
                c"SLIDELOG.APPLY".as_ptr(),
                c"sb".as_ptr(),
                *self.argv.add(1),
                change.as_ptr(),
                change.len(),
            );
        }
    }

    /// Propagates this call as it came (deterministic commands only).
    pub fn replicate_verbatim(&self) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.raw) };
    }
}

impl Key<'_> {
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

fn reply_error(ctx: *mut raw::RedisModuleCtx, text: &str) {
    let text = CString::new(text.replace(['\0', '\r', '\n'], " ")).unwrap_or_default();
    // SAFETY: a live context and a NUL-terminated message.
    unsafe { api!(RedisModule_ReplyWithError)(ctx, text.as_ptr()) };
}

fn reply(ctx: *mut raw::RedisModuleCtx, reply: Reply) {
    // SAFETY: a live context; the array length matches the items written.
    unsafe {
        match reply {
            Reply::Integer(v) => {
                api!(RedisModule_ReplyWithLongLong)(ctx, v);
            }
            Reply::Integers(values) => {
                api!(RedisModule_ReplyWithArray)(ctx, values.len() as _);
                for v in values {
                    api!(RedisModule_ReplyWithLongLong)(ctx, v);
                }
            }
            Reply::Pairs(pairs) => {
                api!(RedisModule_ReplyWithArray)(ctx, (pairs.len() * 2) as _);
                for (name, v) in pairs {
                    api!(RedisModule_ReplyWithStringBuffer)(ctx, name.as_ptr().cast(), name.len());
                    api!(RedisModule_ReplyWithLongLong)(ctx, v);
                }
            }
        }
    }
}

type Body = fn(&Ctx, &[&[u8]]) -> Result<Reply, CommandError>;

/// Runs a command body with panics caught: a panic is an error reply.
fn run(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    body: Body,
) -> c_int {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let call = Ctx {
            raw: ctx,
            argv,
            argc: usize::try_from(argc).unwrap_or(0),
        };
        let args = call.args();
        body(&call, &args)
    }));
    match outcome {
        Ok(Ok(r)) => reply(ctx, r),
        Ok(Err(e)) => reply_error(ctx, &e.to_string()),
        Err(_) => reply_error(
            ctx,
            "ERR slidelog: internal error (a bug; nothing was changed by this reply's command unless it says so)",
        ),
    }
    OK
}

extern "C" fn cmd_check(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, commands::check)
}

extern "C" fn cmd_apply(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, commands::apply)
}

extern "C" fn cmd_reset(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, commands::reset)
}

extern "C" fn cmd_info(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, commands::info)
}

/// A log value handed to a type callback.
fn value<'a>(ptr: *mut c_void) -> Option<&'a Log> {
    // SAFETY: the server hands back a pointer we made from `Box<Log>`.
    unsafe { ptr.cast::<Log>().as_ref() }
}

extern "C" fn rdb_save(io: *mut raw::RedisModuleIO, ptr: *mut c_void) {
    let bytes = catch_unwind(AssertUnwindSafe(|| {
        let mut out = Vec::new();
        if let Some(log) = value(ptr) {
            codec::encode(log, &mut out);
        }
        out
    }))
    .unwrap_or_default();
    // SAFETY: a live IO handle; the buffer is copied.
    unsafe { api!(RedisModule_SaveStringBuffer)(io, bytes.as_ptr().cast(), bytes.len()) };
}

fn log_io_error(io: *mut raw::RedisModuleIO, message: &str) {
    let message = CString::new(message).unwrap_or_default();
    // SAFETY: a live IO handle; "%s" with one C string.
    unsafe {
        api!(RedisModule_LogIOError)(io, c"warning".as_ptr(), c"%s".as_ptr(), message.as_ptr())
    };
}

extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver != ENCODING_VERSION {
        log_io_error(
            io,
            &format!(
                "slidelog: a log of encoding version {encver} cannot be loaded by this module (it reads version {ENCODING_VERSION}); load a module that does"
            ),
        );
        return std::ptr::null_mut();
    }
    let mut len = 0usize;
    // SAFETY: a live IO handle; the buffer is ours to free with RedisModule_Free.
    let bytes = unsafe {
        let ptr = api!(RedisModule_LoadStringBuffer)(io, &mut len);
        if ptr.is_null() {
            return std::ptr::null_mut();
        }
        let copy = std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec();
        api!(RedisModule_Free)(ptr.cast());
        copy
    };
    match catch_unwind(AssertUnwindSafe(|| codec::decode(&bytes))) {
        Ok(Ok((log, used))) if used == bytes.len() => Box::into_raw(Box::new(log)).cast(),
        Ok(Ok(_)) => {
            log_io_error(io, "slidelog: a stored log has trailing bytes");
            std::ptr::null_mut()
        }
        Ok(Err(e)) => {
            log_io_error(io, &format!("slidelog: a stored log is corrupt: {e}"));
            std::ptr::null_mut()
        }
        Err(_) => std::ptr::null_mut(),
    }
}

extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    ptr: *mut c_void,
) {
    let Some(log) = value(ptr) else { return };
    let mut change = crate::args::Change::new();
    for (ts, record) in commands::records(log) {
        change.clear();
        crate::args::change(ts, 0, None, &record, &mut change);
        // SAFETY: "sb" is the key string, then a buffer and its length; the
        // server copies both.
        unsafe {
            api!(RedisModule_EmitAOF)(
                aof,
                c"SLIDELOG.APPLY".as_ptr(),
                c"sb".as_ptr(),
                key,
                change.as_ptr(),
                change.len(),
            );
        }
    }
}

extern "C" fn mem_usage(ptr: *const c_void) -> usize {
    value(ptr.cast_mut()).map_or(0, commands::bytes)
}

extern "C" fn free(ptr: *mut c_void) {
    if !ptr.is_null() {
        // SAFETY: made by `Box::into_raw` in this module; freed once, here.
        drop(unsafe { Box::from_raw(ptr.cast::<Log>()) });
    }
}

extern "C" fn digest(md: *mut raw::RedisModuleDigest, ptr: *mut c_void) {
    let Some(log) = value(ptr) else { return };
    for (ts, costs) in commands::records(log) {
        // SAFETY: a live digest handle.
        unsafe {
            api!(RedisModule_DigestAddLongLong)(md, ts as i64);
            for c in costs {
                api!(RedisModule_DigestAddLongLong)(md, c as i64);
            }
            api!(RedisModule_DigestEndSequence)(md);
        }
    }
}

extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    ptr: *const c_void,
) -> *mut c_void {
    match value(ptr.cast_mut()) {
        Some(log) => Box::into_raw(Box::new(log.clone())).cast(),
        None => std::ptr::null_mut(),
    }
}

fn create_command(
    ctx: *mut raw::RedisModuleCtx,
    name: &CStr,
    f: raw::RedisModuleCmdFunc,
    flags: &CStr,
) -> bool {
    // SAFETY: a live load context; names and flags are static C strings.
    // Key position 1..1 step 1 is what Cluster routing and COMMAND INFO use.
    unsafe { api!(RedisModule_CreateCommand)(ctx, name.as_ptr(), f, flags.as_ptr(), 1, 1, 1) == OK }
}

/// The module's entry point: `--loadmodule <path to libslidelog_module.so>`.
///
/// # Safety
/// Called by the server, once, with its load context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: RedisModule_Init (the C shim of valkey-module) fills every API
    // pointer this server has; "slidelog" is the name MODULE LIST shows.
    let init = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            c"slidelog".as_ptr(),
            1,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    };
    if init == ERR {
        return ERR;
    }
    let mut methods = type_methods();
    // SAFETY: a live load context; the server copies the methods.
    let ty = unsafe {
        api!(RedisModule_CreateDataType)(ctx, TYPE_NAME.as_ptr(), ENCODING_VERSION, &mut methods)
    };
    if ty.is_null() {
        return ERR;
    }
    LOG_TYPE.store(ty, Ordering::Release);
    if create_commands(ctx) { OK } else { ERR }
}

/// The log type's callbacks.
fn type_methods() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        // Version 3: the callbacks up to `copy`; Redis 7.0 knows up to 4.
        version: 3,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

/// Registers the module's commands: false when the server refused one.
fn create_commands(ctx: *mut raw::RedisModuleCtx) -> bool {
    let commands: [(&CStr, raw::RedisModuleCmdFunc, &CStr); 4] = [
        (c"slidelog.check", Some(cmd_check), c"write deny-oom"),
        (c"slidelog.apply", Some(cmd_apply), c"write deny-oom"),
        (c"slidelog.reset", Some(cmd_reset), c"write fast"),
        (c"slidelog.info", Some(cmd_info), c"readonly fast"),
    ];
    commands
        .into_iter()
        .all(|(name, f, flags)| create_command(ctx, name, f, flags))
}
