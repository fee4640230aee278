//! Tests only: an SQLite VFS that wraps the default unix VFS and fails
//! `xSync` on demand (EIO as SQLite sees it: `SQLITE_IOERR_FSYNC`) for the
//! files under one folder, so that a test can make a commit fail at its
//! fsync, as a failing disk does, and look at what is left on disk.
//!
//! [`install`] registers it as the default VFS of the process (every
//! connection opened after it goes through it); it passes every call through
//! unchanged unless [`fail_syncs`] armed it for a folder, so the other tests
//! running in the same process are not affected.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::Path;
use std::sync::{Mutex, Once, OnceLock, PoisonError};

use rusqlite::ffi;

/// The folder whose files' syncs fail, and how many more fail.
static FAILING: Mutex<Option<(String, u32)>> = Mutex::new(None);
/// The unix VFS this one wraps (its address).
static INNER: OnceLock<usize> = OnceLock::new();
static INSTALL: Once = Once::new();

/// Makes the next `count` syncs of files under `dir` fail (`u32::MAX`: all).
pub(crate) fn fail_syncs(dir: &Path, count: u32) {
    install();
    *FAILING.lock().unwrap_or_else(PoisonError::into_inner) =
        Some((dir.display().to_string(), count));
}

/// Syncs succeed again.
pub(crate) fn heal() {
    *FAILING.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

/// True when the sync of the file named `name` is to fail (one of the
/// armed count used up).
fn sync_fails(name: &str) -> bool {
    let mut failing = FAILING.lock().unwrap_or_else(PoisonError::into_inner);
    match failing.as_mut() {
        Some((dir, left)) if *left > 0 && name.starts_with(dir.as_str()) => {
            *left = left.saturating_sub(1);
            true
        }
        _ => false,
    }
}

/// A file of this VFS: SQLite's header, then the unix VFS's file (in the
/// same allocation, `szOsFile` bytes after it).
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    name: *mut String,
}

fn inner() -> *mut ffi::sqlite3_vfs {
    INNER.get().copied().unwrap_or(0) as *mut ffi::sqlite3_vfs
}

unsafe fn real(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    unsafe { (*(f as *mut ShimFile)).real }
}

unsafe fn methods(f: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    unsafe { &*(*real(f)).pMethods }
}

macro_rules! forward {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        unsafe extern "C" fn $name(f: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            unsafe {
                match methods(f).$field {
                    Some(m) => m(real(f) $(, $arg)*),
                    None => Default::default(),
                }
            }
        }
    };
}

forward!(x_read, xRead, (buf: *mut c_void, amt: c_int, off: i64) -> c_int);
forward!(x_write, xWrite, (buf: *const c_void, amt: c_int, off: i64) -> c_int);
forward!(x_truncate, xTruncate, (size: i64) -> c_int);
forward!(x_file_size, xFileSize, (size: *mut i64) -> c_int);
forward!(x_lock, xLock, (level: c_int) -> c_int);
forward!(x_unlock, xUnlock, (level: c_int) -> c_int);
forward!(x_check_reserved, xCheckReservedLock, (out: *mut c_int) -> c_int);
forward!(x_file_control, xFileControl, (op: c_int, arg: *mut c_void) -> c_int);
forward!(x_sector_size, xSectorSize, () -> c_int);
forward!(x_device, xDeviceCharacteristics, () -> c_int);
forward!(x_shm_map, xShmMap, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int);
forward!(x_shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int) -> c_int);
forward!(x_shm_unmap, xShmUnmap, (delete: c_int) -> c_int);
forward!(x_fetch, xFetch, (off: i64, amt: c_int, out: *mut *mut c_void) -> c_int);
forward!(x_unfetch, xUnfetch, (off: i64, p: *mut c_void) -> c_int);

unsafe extern "C" fn x_shm_barrier(f: *mut ffi::sqlite3_file) {
    unsafe {
        if let Some(m) = methods(f).xShmBarrier {
            m(real(f));
        }
    }
}

unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    unsafe {
        let name = &*(*(f as *mut ShimFile)).name;
        if sync_fails(name) {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        match methods(f).xSync {
            Some(m) => m(real(f), flags),
            None => ffi::SQLITE_OK,
        }
    }
}

unsafe extern "C" fn x_close(f: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let shim = f as *mut ShimFile;
        let rc = match methods(f).xClose {
            Some(m) => m(real(f)),
            None => ffi::SQLITE_OK,
        };
        drop(Box::from_raw((*shim).name));
        (*shim).name = std::ptr::null_mut();
        rc
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    unsafe {
        let _ = vfs;
        let inner = inner();
        let shim = f as *mut ShimFile;
        (*shim).base.pMethods = std::ptr::null();
        (*shim).real =
            (f as *mut u8).add(std::mem::size_of::<ShimFile>()) as *mut ffi::sqlite3_file;
        let Some(open) = (*inner).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        let rc = open(inner, name, (*shim).real, flags, out_flags);
        if (*(*shim).real).pMethods.is_null() {
            return rc;
        }
        let text = if name.is_null() {
            String::new()
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        };
        (*shim).name = Box::into_raw(Box::new(text));
        (*shim).base.pMethods = &METHODS;
        rc
    }
}

/// Registers the VFS as the process's default (once).
pub(crate) fn install() {
    INSTALL.call_once(|| unsafe {
        let unix = ffi::sqlite3_vfs_find(std::ptr::null());
        assert!(!unix.is_null(), "no default VFS");
        let _ = INNER.set(unix as usize);
        let mut vfs: ffi::sqlite3_vfs = std::ptr::read(unix);
        vfs.szOsFile = (*unix).szOsFile + std::mem::size_of::<ShimFile>() as c_int;
        vfs.pNext = std::ptr::null_mut();
        vfs.zName = c"authd-fault".as_ptr();
        vfs.xOpen = Some(x_open);
        let vfs = Box::leak(Box::new(vfs));
        let rc = ffi::sqlite3_vfs_register(vfs, 1);
        assert_eq!(rc, ffi::SQLITE_OK, "registering the fault VFS");
    });
}
