//! The module's entry point, the command trampolines and the data type's
//! callbacks: what the server calls. Each command body runs under
//! `catch_unwind` (see the parent module's rules); the safe wrappers it
//! hands to the commands live in the parent module.
#![allow(unsafe_code)]

use super::{Ctx, ENCODING_VERSION, ERR, LOG_TYPE, OK, TYPE_NAME, bytes_of};
use crate::commands::{self, Reply};
use crate::error::CommandError;
use slidelog_core::{Log, codec};
use std::ffi::{CStr, CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use valkey_module::raw;

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
                    let name = name.as_bytes();
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

extern "C" fn cmd_check_all(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, crate::all::check_all)
}

extern "C" fn cmd_apply(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, commands::apply)
}

extern "C" fn cmd_settle(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    run(c, v, n, commands::settle)
}

extern "C" fn cmd_charge(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> c_int {
    let declared = catch_unwind(AssertUnwindSafe(|| declare_charge_keys(c, v, n)));
    if declared.unwrap_or(true) {
        return OK;
    }
    run(c, v, n, commands::charge)
}

/// Answers the server's key-position request of a charge (the command is
/// registered with `getkeys-api`): the log key, and the once key of a
/// trailing `ONCE <key> <ttl_ms>`, so that Cluster routes and checks both.
/// False when this call is not such a request.
fn declare_charge_keys(
    c: *mut raw::RedisModuleCtx,
    v: *mut *mut raw::RedisModuleString,
    n: c_int,
) -> bool {
    // SAFETY: a live context.
    if unsafe { api!(RedisModule_IsKeysPositionRequest)(c) } == 0 {
        return false;
    }
    let call = Ctx {
        raw: c,
        argv: v,
        argc: usize::try_from(n).unwrap_or(0),
    };
    let mut argv = vec![&b""[..]];
    argv.extend(call.args());
    if argv.len() > 1 {
        // SAFETY: a key-position request's context; position 1 exists.
        unsafe { api!(RedisModule_KeyAtPos)(c, 1) };
    }
    if let Some(at) = crate::args::once_key_position(&argv) {
        // SAFETY: as above; `at` is below argc.
        unsafe { api!(RedisModule_KeyAtPos)(c, at as c_int) };
    }
    true
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
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a live IO handle; "%s" with one C string.
    unsafe {
        api!(RedisModule_LogIOError)(io, c"warning".as_ptr(), c"%s".as_ptr(), message.as_ptr())
    };
}

/// The name of the key being loaded, escaped for a log line (binary keys,
/// control bytes) and cut at 200 bytes; `?` where the server has none.
fn key_name(io: *mut raw::RedisModuleIO) -> String {
    // SAFETY: a live IO handle; the name (if any) lives as long as the load.
    let name = unsafe { api!(RedisModule_GetKeyNameFromIO)(io) };
    if name.is_null() {
        return "?".into();
    }
    let bytes = bytes_of(name);
    let mut out: String = bytes
        .iter()
        .take(200)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if bytes.len() > 200 {
        out.push_str("...");
    }
    out
}

/// The module's one string, or `None` when the server could not read it:
/// a short read, a bad opcode, a length past the payload's end. Because
/// the module sets `REDISMODULE_OPTIONS_HANDLE_IO_ERRORS`, the server
/// reports those through `IsIOError` instead of panicking, and the value
/// must then be refused (whatever the call returned).
fn load_string(io: *mut raw::RedisModuleIO) -> Option<Vec<u8>> {
    let mut len = 0usize;
    // SAFETY: a live IO handle; a returned buffer is ours to free with
    // RedisModule_Free, and is copied before it is.
    unsafe {
        let ptr = api!(RedisModule_LoadStringBuffer)(io, &mut len);
        let failed = api!(RedisModule_IsIOError)(io) != 0;
        if ptr.is_null() {
            return None;
        }
        let copy = (!failed).then(|| std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec());
        api!(RedisModule_Free)(ptr.cast());
        copy
    }
}

/// Reads one log, or says why it cannot.
fn load_log(io: *mut raw::RedisModuleIO, encver: c_int) -> Result<Log, String> {
    if encver != ENCODING_VERSION {
        return Err(format!(
            "it is of encoding version {encver} and this module reads version {ENCODING_VERSION}; load a module that does"
        ));
    }
    let bytes = load_string(io).ok_or(
        "the server could not read its bytes (a short read, a bad module opcode or a length past the end)",
    )?;
    match codec::decode(&bytes) {
        Ok((log, used)) if used == bytes.len() => Ok(log),
        Ok((_, used)) => Err(format!(
            "{} trailing bytes after the log",
            bytes.len() - used
        )),
        Err(e) => Err(format!("it is corrupt: {e}")),
    }
}

/// A log read from an RDB file or a `RESTORE` payload. Anything it cannot
/// read (a short read, a bad opcode, codec garbage, another encoding
/// version) is logged naming the key and answered with NULL: `RESTORE`
/// then replies with an error and loads nothing, and an RDB load stops
/// with the server's own error (exit 1), never a panic.
extern "C" fn rdb_load(io: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let loaded = catch_unwind(AssertUnwindSafe(|| match load_log(io, encver) {
        Ok(log) => Box::into_raw(Box::new(log)).cast(),
        Err(why) => {
            let key = key_name(io);
            log_io_error(
                io,
                &format!("slidelog: could not read the log of key '{key}': {why}"),
            );
            std::ptr::null_mut()
        }
    }));
    loaded.unwrap_or(std::ptr::null_mut())
}

/// Writes the `SLIDELOG.APPLY` commands that rebuild a log
/// ([`crate::rewrite::changes`]): its records, its horizon and its settled
/// receipts.
extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    ptr: *mut c_void,
) {
    let Some(log) = value(ptr) else { return };
    // A panic must not unwind into the server (none is expected: the
    // rewrite only reads the log).
    let _ = catch_unwind(AssertUnwindSafe(|| {
        crate::rewrite::changes(log, |change| {
            // SAFETY: "sb" is the key string, then a buffer and its length;
            // the server copies both.
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
        });
    }));
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

/// Where a command's keys are: first, last (negative: from the end) and
/// step, what Cluster routing, `COMMAND INFO` and `COMMAND GETKEYS` use.
type KeySpec = (c_int, c_int, c_int);

fn create_command(
    ctx: *mut raw::RedisModuleCtx,
    name: &CStr,
    f: raw::RedisModuleCmdFunc,
    flags: &CStr,
    (first, last, step): KeySpec,
) -> bool {
    // SAFETY: a live load context; names and flags are static C strings.
    unsafe {
        api!(RedisModule_CreateCommand)(ctx, name.as_ptr(), f, flags.as_ptr(), first, last, step)
            == OK
    }
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
    if init == ERR || !handle_io_errors(ctx) {
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

/// Declares that `rdb_load` checks `IsIOError` after every read, so that a
/// bad payload (`RESTORE`, an RDB file, a replica's full sync) is refused
/// instead of making the server panic. False (the module refuses to load)
/// when this server lacks the API: a module that could be crashed by one
/// `RESTORE` is worse than none.
fn handle_io_errors(ctx: *mut raw::RedisModuleCtx) -> bool {
    // SAFETY: written once by RedisModule_Init, just before.
    let Some(set_options) = (unsafe { raw::RedisModule_SetModuleOptions }) else {
        return false;
    };
    // SAFETY: the load context; the option is a plain flag.
    unsafe { set_options(ctx, raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int) };
    // SAFETY: as above; copied out, not borrowed (a null IsIOError would
    // make every load refuse its value through a caught panic).
    let (is_io_error, key_name) = unsafe {
        (
            raw::RedisModule_IsIOError,
            raw::RedisModule_GetKeyNameFromIO,
        )
    };
    is_io_error.is_some() && key_name.is_some()
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
    // SETTLE may widen a log's cost sums and CHARGE appends: both can grow
    // memory, so both are refused under maxmemory as CHECK is.
    // One key at position 1, except CHECKALL: `<mode> <now> <deadline>`
    // then `<key> <limits>` pairs, so its keys are every other argument
    // from the 4th to the one before last.
    let one = (1, 1, 1);
    let commands: [(&CStr, raw::RedisModuleCmdFunc, &CStr, KeySpec); 7] = [
        (c"slidelog.check", Some(cmd_check), c"write deny-oom", one),
        (
            c"slidelog.checkall",
            Some(cmd_check_all),
            c"write deny-oom",
            (4, -2, 2),
        ),
        (c"slidelog.settle", Some(cmd_settle), c"write deny-oom", one),
        // getkeys-api: a charge's ONCE key is a key too (declare_charge_keys).
        (
            c"slidelog.charge",
            Some(cmd_charge),
            c"write deny-oom getkeys-api",
            one,
        ),
        (c"slidelog.apply", Some(cmd_apply), c"write deny-oom", one),
        (c"slidelog.reset", Some(cmd_reset), c"write fast", one),
        (c"slidelog.info", Some(cmd_info), c"readonly fast", one),
    ];
    commands
        .into_iter()
        .all(|(name, f, flags, keys)| create_command(ctx, name, f, flags, keys))
}
