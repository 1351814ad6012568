//! Containing a spawned worker and killing everything it started, portably.
//!
//! Unix: the worker is spawned as the leader of its own process group
//! ([`LaunchPlan::command`](super::LaunchPlan::command) sets `process_group(0)`), so
//! [`kill_tree`] is one `kill(-pgid, SIGKILL)`. Wrappers that start a new session
//! (`bwrap --new-session`) leave that group, and are covered by their own teardown:
//! bwrap's `--die-with-parent` and pid namespace, docker's `rm -f` kill plan.
//!
//! Windows: [`contain`] puts the worker in a Job Object with a memory cap that kills the
//! whole job when its last handle — the [`ProcessGuard`] — is closed.

use std::io;

use tokio::process::Child;

/// Keeps a worker contained while it lives. Dropping it on Windows closes the Job
/// Object, which kills every process in it; on Unix it holds nothing (kill the group
/// with [`kill_tree`]).
#[derive(Debug)]
#[must_use = "dropping the guard kills the worker on Windows"]
pub(crate) struct ProcessGuard {
    #[cfg(windows)]
    _job: super::job_object::JobObject,
}

/// Contains the freshly spawned `child`: on Windows assigns it to a new Job Object
/// capped at `memory_limit_bytes` (per process and for the whole job) that kills the
/// tree on close; on Unix checks it leads its own process group, which is what makes
/// [`kill_tree`] reach its descendants and nothing else.
pub(crate) fn contain(child: &Child, memory_limit_bytes: u64) -> io::Result<ProcessGuard> {
    #[cfg(windows)]
    {
        let handle = child
            .raw_handle()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the worker has already exited"))?;
        Ok(ProcessGuard { _job: super::job_object::JobObject::contain(handle, memory_limit_bytes)? })
    }
    #[cfg(unix)]
    {
        // Memory is capped inside the worker (store limits, and the RLIMIT_DATA it sets
        // on itself from its arguments) and by docker's --memory: the worker rather than
        // a prlimit here, because under bwrap and docker this child is not the worker.
        let _ = memory_limit_bytes;
        let id =
            child.id().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the worker has already exited"))?;
        let pid = pid(id)?;
        let group = rustix::process::getpgid(Some(pid))?;
        if group != pid {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the worker does not lead its own process group: spawn it with LaunchPlan::command()",
            ));
        }
        Ok(ProcessGuard {})
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (child, memory_limit_bytes);
        Err(io::Error::new(io::ErrorKind::Unsupported, "no process containment on this platform"))
    }
}

/// Contains a freshly spawned helper program that may start processes of its own
/// ([`crate::process::ProcessTree`]): Windows assigns it to a Job Object whose only
/// limit is that closing it kills the tree; elsewhere this is [`contain`]'s check that
/// it leads its own process group (no limit is set there either).
pub(crate) fn contain_tree(child: &Child) -> io::Result<ProcessGuard> {
    #[cfg(windows)]
    {
        let handle = child
            .raw_handle()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the process has already exited"))?;
        Ok(ProcessGuard { _job: super::job_object::JobObject::kill_on_close(handle)? })
    }
    #[cfg(not(windows))]
    {
        contain(child, u64::MAX)
    }
}

/// Kills the worker and everything in its tree. Unix: `SIGKILL` to its process group,
/// while the worker is not yet reaped (a reaped leader's id could name someone else's
/// group), then to the worker itself. Windows: terminates the worker; the rest of the
/// Job Object dies when the [`ProcessGuard`] is dropped.
pub(crate) fn kill_tree(child: &mut Child) -> io::Result<()> {
    #[cfg(unix)]
    if let Some(id) = child.id() {
        match rustix::process::kill_process_group(pid(id)?, rustix::process::Signal::KILL) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(error) => return Err(error.into()),
        }
    }
    match child.start_kill() {
        // Already exited and reaped: nothing left to kill.
        Err(error) if error.kind() == io::ErrorKind::InvalidInput => Ok(()),
        other => other,
    }
}

#[cfg(unix)]
fn pid(id: u32) -> io::Result<rustix::process::Pid> {
    i32::try_from(id)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{id} is not a process id")))
}

#[cfg(all(test, unix))]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::isolation::LaunchPlan;

    fn shell(script: &str) -> LaunchPlan {
        LaunchPlan {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            kill_plan: None,
        }
    }

    #[tokio::test]
    async fn kill_tree_kills_the_worker_and_its_descendants() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        // The worker starts a grandchild that would outlive a plain kill of the worker.
        let script = format!("/bin/sleep 300 & echo $! > '{}'; wait", pid_file.display());
        let mut child = shell(&script).command().spawn().unwrap();
        let _guard = contain(&child, 1 << 30).unwrap();
        let grandchild = loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file) {
                if let Ok(pid) = text.trim().parse::<i32>() {
                    break rustix::process::Pid::from_raw(pid).unwrap();
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        kill_tree(&mut child).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
        assert!(!status.success());
        // The grandchild (reparented to init, which reaps it) disappears too.
        let gone = async {
            while rustix::process::test_kill_process(grandchild).is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), gone).await.expect("the grandchild survived kill_tree");
        // Killing again, after the worker is reaped, is harmless.
        kill_tree(&mut child).unwrap();
    }

    #[tokio::test]
    async fn contain_refuses_a_worker_in_the_parents_group() {
        let mut command = tokio::process::Command::new("/bin/sleep");
        command.arg("5").kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        let error = contain(&child, 1 << 30).unwrap_err();
        assert!(error.to_string().contains("process group"), "{error}");
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }
}
