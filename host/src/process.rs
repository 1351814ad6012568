//! Running a helper program as a process tree that is killed as a whole — the
//! containment the worker uses, for embedders that run programs of their own (the CLI's
//! command-backed tools).
//!
//! A program started through `sh -c` or a script often starts children of its own;
//! killing only the direct child leaves them running. [`ProcessTree`] spawns the
//! program so that everything it starts can be killed with it:
//!
//! - Unix: the program leads a new process group; killing the tree sends `SIGKILL` to
//!   the group. A descendant that leaves the group (`setsid`, a daemon) is not reached.
//! - Windows: the program runs in a Job Object that kills every process in it when the
//!   tree is dropped.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use wasmbox::process::ProcessTree;
//! let mut command = tokio::process::Command::new("sh");
//! command.args(["-c", "sleep 60 & echo started"]).stdout(std::process::Stdio::piped());
//! let mut tree = ProcessTree::spawn(&mut command)?;
//! let _stdout = tree.child_mut().stdout.take();
//! // Waits for `sh`, then (Unix) kills the `sleep` it left behind.
//! let status = tree.wait().await?;
//! assert!(status.success());
//! # Ok(()) }
//! ```

use std::io;
use std::process::ExitStatus;

use tokio::process::{Child, Command};

use crate::isolation::{self, ProcessGuard};

/// A spawned program and every process it starts. Dropping it kills all of them that
/// are still running (so does [`kill`](Self::kill)); [`wait`](Self::wait) waits for the
/// program and (Unix) then kills what it left behind.
#[derive(Debug)]
pub struct ProcessTree {
    child: Child,
    // Dropped after `child`: on Windows closing the Job Object kills the tree.
    _guard: ProcessGuard,
}

impl ProcessTree {
    /// Spawns `command` as a tree: on Unix in a new process group (this overrides a
    /// `process_group` set on `command`), on Windows in a new Job Object. Stdio and
    /// environment are the caller's to set on `command`.
    ///
    /// # Errors
    /// The spawn error, or the error of containing the process (which is then killed).
    pub fn spawn(command: &mut Command) -> io::Result<Self> {
        #[cfg(unix)]
        command.process_group(0);
        // Until the guard exists nothing else kills it.
        command.kill_on_drop(true);
        let mut child = command.spawn()?;
        match isolation::contain_tree(&child) {
            Ok(guard) => Ok(ProcessTree { child, _guard: guard }),
            Err(err) => {
                let _ = isolation::kill_tree(&mut child);
                Err(err)
            }
        }
    }

    /// The program's process, to take its stdio pipes. Wait through
    /// [`wait`](Self::wait), not `Child::wait`, which cannot kill the leftovers.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the program to exit and returns its exit status. On Unix it then kills
    /// whatever the program left running in its group at once, which also closes the
    /// pipes those processes inherited, so a reader of the program's output sees its
    /// end; on Windows they live until the tree is dropped.
    ///
    /// # Errors
    /// An error waiting for or killing the processes.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        #[cfg(unix)]
        if let Some(id) = self.child.id() {
            // The program's id names its group only until it is reaped, so wait for its
            // exit without reaping it (WNOWAIT), kill the group, and only then reap.
            let pid = i32::try_from(id)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{id} is not a process id")))?;
            let options = rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT;
            tokio::task::spawn_blocking(move || loop {
                match rustix::process::waitid(rustix::process::WaitId::Pid(pid), options) {
                    Err(rustix::io::Errno::INTR) => continue,
                    other => return other.map(drop),
                }
            })
            .await
            .map_err(io::Error::other)??;
            isolation::kill_tree(&mut self.child)?;
        }
        self.child.wait().await
    }

    /// Kills the program and everything in its tree now.
    ///
    /// # Errors
    /// An error sending the signal (Unix) or terminating the process (Windows).
    pub fn kill(&mut self) -> io::Result<()> {
        isolation::kill_tree(&mut self.child)
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        if let Err(err) = isolation::kill_tree(&mut self.child) {
            tracing::warn!(error = %err, "could not kill a process tree");
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("/bin/sh");
        command.args(["-c", script]);
        command
    }

    /// The pid the script wrote to `file`, once it has.
    async fn pid_in(file: &Path) -> rustix::process::Pid {
        loop {
            if let Ok(text) = std::fs::read_to_string(file) {
                if let Some(pid) = text.strip_suffix('\n').and_then(|pid| pid.parse().ok()) {
                    return rustix::process::Pid::from_raw(pid).unwrap();
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (at most 10 s) for `pid` to be gone.
    async fn gone(pid: rustix::process::Pid) -> bool {
        let gone = async {
            while rustix::process::test_kill_process(pid).is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), gone).await.is_ok()
    }

    #[tokio::test]
    async fn dropping_the_tree_kills_the_program_and_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pid");
        let tree = ProcessTree::spawn(&mut shell(&format!("/bin/sleep 300 & echo $! > '{}'; wait", file.display())));
        let tree = tree.unwrap();
        let grandchild = pid_in(&file).await;
        drop(tree);
        assert!(gone(grandchild).await, "the grandchild outlived its tree");
    }

    #[tokio::test]
    async fn waiting_kills_what_the_program_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pid");
        // `sh` exits at once; its `sleep` keeps the stdout pipe open.
        let mut command = shell(&format!("/bin/sleep 300 & echo $! > '{}'; echo done", file.display()));
        command.stdout(std::process::Stdio::piped());
        let mut tree = ProcessTree::spawn(&mut command).unwrap();
        let mut stdout = tree.child_mut().stdout.take().unwrap();
        let status = tree.wait().await.unwrap();
        assert!(status.success());
        assert!(gone(pid_in(&file).await).await, "the leftover outlived wait");
        // With the leftover gone, its end of the pipe is closed too.
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut out).await.unwrap();
        assert_eq!(out, "done\n");
        tree.kill().unwrap();
    }
}
