//! wasmbox: keeps the kernel from mapping the neighbours of every page a run reads in a
//! pool slot's image ("fault-around").
//!
//! On a read fault in a file mapping Linux maps up to `fault_around_bytes` (64 KiB by
//! default) of the file's cached pages around the one asked for. In a slot that resets
//! in place (`PAGEMAP_SCAN`) those pages stay mapped for the slot's life: no run asked
//! for them, yet they raise the slot's resident set and every reset's scan walks their
//! page-table entries. The kernel skips fault-around in a mapping registered with
//! userfaultfd for write-protection, so each image mapping of such a slot is registered,
//! in asynchronous mode and never armed: no page is ever write-protected, so no fault
//! is ever reported and nothing reads the descriptor. The reset's scan is checked on a
//! registered mapping too (`PageMap::new`) before a pool relies on both. Where
//! userfaultfd is refused (a seccomp filter such as Docker's default, a kernel without
//! asynchronous write-protection), or its check fails, slots fault as before.

use rustix::fd::{AsFd, OwnedFd};
use rustix::ioctl::{Updater, ioctl, opcode};
use rustix::mm::{UserfaultfdFlags, userfaultfd};

/// `UFFD_USER_MODE_ONLY`: faults from user space only, which is all this needs, and
/// what an unprivileged process may ask for where `vm.unprivileged_userfaultfd` is 0.
const USER_MODE_ONLY: u32 = 1;
/// `UFFD_API`.
const API: u64 = 0xAA;
/// `UFFD_FEATURE_WP_ASYNC`: the kernel resolves a write to a write-protected page
/// itself rather than report it. Only in this mode may a mapping of a regular file (as
/// an image is) be registered, and it makes sure that, were a page ever write-protected,
/// no thread could block on the descriptor.
const FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFDIO_REGISTER_MODE_WP`.
const REGISTER_MODE_WP: u64 = 1 << 1;

/// `struct uffdio_api`.
#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

const UFFDIO_API: rustix::ioctl::Opcode = opcode::read_write::<UffdioApi>(0xAA, 0x3F);
const UFFDIO_REGISTER: rustix::ioctl::Opcode = opcode::read_write::<UffdioRegister>(0xAA, 0x00);

/// A userfaultfd descriptor set up for asynchronous write-protection, whose only use is
/// [`NoFaultAround::register`].
#[derive(Debug)]
pub struct NoFaultAround {
    fd: OwnedFd,
    /// The process that opened it. A descriptor inherited across `fork` still speaks
    /// for its opener's address space, so a child must not register with it.
    pid: u32,
}

impl NoFaultAround {
    /// A descriptor, or `None` where userfaultfd or its asynchronous write-protection
    /// is not available to this process.
    pub fn open() -> Option<NoFaultAround> {
        let flags = UserfaultfdFlags::CLOEXEC
            | UserfaultfdFlags::NONBLOCK
            | UserfaultfdFlags::from_bits_retain(USER_MODE_ONLY);
        // SAFETY: the descriptor is only ever used to register mappings for
        // write-protection that is never armed (see the module's header).
        let fd = unsafe { userfaultfd(flags) }.ok()?;
        let mut api = UffdioApi {
            api: API,
            features: FEATURE_WP_ASYNC,
            ioctls: 0,
        };
        // SAFETY: `UFFDIO_API` reads and writes a `struct uffdio_api`.
        unsafe { ioctl(&fd, Updater::<UFFDIO_API, UffdioApi>::new(&mut api)) }.ok()?;
        Some(NoFaultAround {
            fd,
            pid: std::process::id(),
        })
    }

    /// Registers the mapping at `start`, `len` bytes (page-aligned, wholly mapped), so
    /// that its faults map only the page faulted on. False if the kernel refused it.
    pub fn register(&self, start: *const u8, len: usize) -> bool {
        if std::process::id() != self.pid {
            return false;
        }
        let mut register = UffdioRegister {
            start: start.addr() as u64,
            len: len as u64,
            mode: REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: `UFFDIO_REGISTER` reads and writes a `struct uffdio_register`; the
        // registration changes no page's contents or protection.
        unsafe {
            ioctl(
                self.fd.as_fd(),
                Updater::<UFFDIO_REGISTER, UffdioRegister>::new(&mut register),
            )
        }
        .is_ok()
    }
}
