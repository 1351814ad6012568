//! The Windows Job Object around a worker: a memory cap for the process and the whole
//! job, no child processes, no error-report dialog on a crash (the worker dies and the
//! parent reports `crashed`), and every process in it killed when the job's handle is
//! closed — on drop, or by the OS if the parent itself dies. A helper program that may
//! start processes of its own (a command tool) gets a job with only that last property.
//!
//! Raw Win32 calls need `unsafe`; it is allowed in this module only.

#![allow(unsafe_code)]

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};

use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_ACTIVE_PROCESS, JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION,
    JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
};

/// An owned Job Object handle; closing it kills the job's processes.
#[derive(Debug)]
pub(super) struct JobObject(OwnedHandle);

impl JobObject {
    /// Creates a job with the limits above and assigns `process` (a live process handle
    /// the caller keeps open for the duration of the call) to it.
    pub(super) fn contain(process: RawHandle, memory_limit_bytes: u64) -> io::Result<JobObject> {
        let limit = usize::try_from(memory_limit_bytes).unwrap_or(usize::MAX);
        let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
            | JOB_OBJECT_LIMIT_PROCESS_MEMORY
            | JOB_OBJECT_LIMIT_JOB_MEMORY
            | JOB_OBJECT_LIMIT_ACTIVE_PROCESS
            | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
        // The worker starts no processes of its own.
        info.BasicLimitInformation.ActiveProcessLimit = 1;
        info.ProcessMemoryLimit = limit;
        info.JobMemoryLimit = limit;
        Self::create(process, &info)
    }

    /// Creates a job whose only limit is that closing it kills every process in it, and
    /// assigns `process` (as for [`contain`](Self::contain)) to it: for a helper program
    /// that may start processes of its own ([`crate::process::ProcessTree`]).
    pub(super) fn kill_on_close(process: RawHandle) -> io::Result<JobObject> {
        let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        Self::create(process, &info)
    }

    fn create(process: RawHandle, info: &JOBOBJECT_EXTENDED_LIMIT_INFORMATION) -> io::Result<JobObject> {
        // SAFETY: both arguments may be null (default security, unnamed job); the
        // returned handle is checked before use.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid handle that nothing else owns; OwnedHandle
        // closes it exactly once.
        let job = JobObject(unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) });
        // SAFETY: `info` is a fully initialised JOBOBJECT_EXTENDED_LIMIT_INFORMATION that
        // lives across the call, and the length passed is its size.
        let ok = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                std::ptr::from_ref(info).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `job` is valid, and the caller guarantees `process` is a live process
        // handle (tokio's Child keeps it open until the child is reaped).
        let ok = unsafe { AssignProcessToJobObject(job.raw(), process as _) };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    fn raw(&self) -> windows_sys::Win32::Foundation::HANDLE {
        self.0.as_raw_handle() as _
    }
}
