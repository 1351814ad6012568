//! The thread that takes a pooled (default) sync tool's call when it is free, woken
//! ahead of the call so that handing the call over costs no thread wake.
//!
//! Why: a pooled call goes to another thread so that its deadline can end it, and
//! waking a parked thread for it is most of its cost. On the development VM the kernel
//! woke tokio's blocking-pool thread on the other, idle core in nearly every JS W2 call,
//! and an idle virtual CPU is slow to wake (docs/performance.md, "The Python package",
//! has the figures). So a run whose sandbox has pooled sync tools wakes this thread as it
//! starts ([`RunInFlight`]), while its instance and guest get going, and the thread
//! spins (yielding its CPU) for a call: until the run ends, at most [`SPIN_FOR_CALL`]
//! after it was woken or finished its last call. A call handed to it meanwhile starts
//! at once. After a spin it parks, and a call then wakes it; on Linux on the caller's
//! core ([`placement`]), which waits for the answer yielding its CPU, rather than on an
//! idle core that takes long to wake.
//!
//! It spins only while that run is the only run of the package in flight (with more,
//! the cores have other work to do), and stops when the kernel kept it off its core for
//! longer than [`STOP_HELD_OFF`] (the core is wanted by other work). A spinning thread
//! that has not turned for [`HELD_OFF`] is not running and would start a call late, so a
//! call is then given to the pool instead. Runs also stop waking it when that does not
//! pay: after [`MISSES_TO_STOP`] runs in a row that woke it and had none of their calls
//! taken while it spun (a sandbox whose tools a run seldom calls, a call more than
//! [`SPIN_FOR_CALL`] into a run, a core shared with other work, such as the engine's
//! thread that prepares the next Python instance), only every [`PROBE_EVERY`]th run wakes
//! it, until one pays again. On a busy machine the kernel may also keep it off its core
//! after it took the call (a thread that spun waits longer for its next turn): a caller
//! that has spun for its answer in vain takes a call that has not started yet back
//! ([`Handed::take_back`]) and gives it to the pool.
//!
//! It is one thread. While it runs a call (one that blocks or hangs, or another run's
//! call), the next call goes to tokio's blocking pool as before: a tool that hangs holds
//! up only its own call, its deadline still ends the call (the thread is free again when
//! the function returns), and concurrent runs keep their concurrency.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long the thread spins for a call after a run woke it or after its last call.
const SPIN_FOR_CALL: Duration = Duration::from_millis(1);

/// A spinning thread that has not turned for this long is kept off its core: a call
/// goes to the pool instead.
const HELD_OFF: Duration = Duration::from_micros(50);

/// A gap this long between two turns of the spin means the kernel runs other work on
/// the thread's core: it parks. (Shorter gaps are common on the development VM, whose
/// virtual CPUs the host deschedules now and then.)
const STOP_HELD_OFF: Duration = Duration::from_micros(500);

/// Runs in a row whose waking the thread did not pay before runs stop waking it.
const MISSES_TO_STOP: u32 = 4;

/// While waking it does not pay, one run in this many wakes the thread to try again.
const PROBE_EVERY: usize = 32;

type Job = Box<dyn FnOnce() + Send>;

/// [`STATE`]: no call; a caller is handing one over; a call is in [`JOB`] or running.
const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const TAKEN: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(FREE);
/// The call handed over and not started yet, with its number ([`Handed`]).
static JOB: Mutex<Option<(u64, Job)>> = Mutex::new(None);
static HANDED: AtomicU64 = AtomicU64::new(0);
/// When the thread last turned in its spin, in ns since [`epoch`] (0: it is not spinning).
static SPUN_AT: AtomicU64 = AtomicU64::new(0);
/// The package's runs (and session steps) in flight, and those of them whose sandbox
/// has pooled sync tools.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static WANTING: AtomicUsize = AtomicUsize::new(0);
/// Runs in a row that woke the thread in vain; calls taken while it spun; whether the
/// last run to start may have the thread spin; how many runs with pooled tools started.
static MISSES: AtomicU32 = AtomicU32::new(0);
static CAUGHT: AtomicUsize = AtomicUsize::new(0);
static MAY_SPIN: AtomicBool = AtomicBool::new(true);
static STARTED: AtomicUsize = AtomicUsize::new(0);

/// The thread, started on first use; `None` if it could not be started.
fn thread() -> Option<&'static Thread> {
    static THREAD: OnceLock<Option<Thread>> = OnceLock::new();
    THREAD
        .get_or_init(|| {
            let spawned = std::thread::Builder::new().name("wasmbox-tool".into()).spawn(|| {
                placement::register();
                serve();
            });
            spawned.ok().map(|handle| handle.thread().clone())
        })
        .as_ref()
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn nanos(at: Instant) -> u64 {
    u64::try_from(at.duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// Whether the thread should spin: the one run in flight may call a pooled tool.
fn wanted() -> bool {
    IN_FLIGHT.load(Ordering::Relaxed) == 1 && WANTING.load(Ordering::Relaxed) == 1 && MAY_SPIN.load(Ordering::Relaxed)
}

fn job() -> std::sync::MutexGuard<'static, Option<(u64, Job)>> {
    JOB.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Hands `call` to the thread if it is free and spinning or parked; gives it back if
/// not (the caller then uses the blocking pool).
pub(crate) fn hand<F: FnOnce() + Send + 'static>(call: F) -> Result<Handed, F> {
    let Some(thread) = thread() else { return Err(call) };
    let spun_at = SPUN_AT.load(Ordering::Relaxed);
    if spun_at != 0 && nanos(Instant::now()).saturating_sub(spun_at) > HELD_OFF.as_nanos() as u64 {
        return Err(call); // spinning, but kept off its core: it would start the call late
    }
    if STATE.compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return Err(call);
    }
    let number = HANDED.fetch_add(1, Ordering::Relaxed);
    {
        let mut job = job();
        *job = Some((number, Box::new(call)));
        // Under the lock: the thread takes the call (and frees STATE after it) only
        // after this.
        STATE.store(TAKEN, Ordering::Release);
    }
    if spun_at == 0 {
        placement::near_caller();
    }
    thread.unpark();
    Ok(Handed(number))
}

/// A call [`hand`] gave the thread.
pub(crate) struct Handed(u64);

impl Handed {
    /// The call, if the thread has not started it yet; the thread is free again.
    pub(crate) fn take_back(self) -> Option<Job> {
        let mut job = job();
        if job.as_ref().is_none_or(|(number, _)| *number != self.0) {
            return None;
        }
        STATE.store(FREE, Ordering::Release);
        job.take().map(|(_, call)| call)
    }
}

/// The thread's loop: wait for a call (spinning while [`wanted`], else parked), run it.
fn serve() {
    loop {
        let call = next_call();
        // A panic ends the call (its caller hears "the tool panicked"), not the thread.
        let _ = catch_unwind(AssertUnwindSafe(call));
        STATE.store(FREE, Ordering::Release);
    }
}

fn next_call() -> Job {
    let mut since = Instant::now();
    let mut last = since;
    loop {
        if STATE.load(Ordering::Acquire) == TAKEN {
            // None if its caller took it back meanwhile.
            if let Some((_, call)) = job().take() {
                placement::anywhere();
                if SPUN_AT.swap(0, Ordering::Relaxed) != 0 {
                    CAUGHT.fetch_add(1, Ordering::Relaxed);
                }
                return call;
            }
        }
        let now = Instant::now();
        if wanted() && now - since < SPIN_FOR_CALL && now - last < STOP_HELD_OFF {
            SPUN_AT.store(nanos(now), Ordering::Relaxed);
            last = now;
            std::thread::yield_now();
        } else {
            SPUN_AT.store(0, Ordering::Relaxed);
            std::thread::park();
            since = Instant::now();
            last = since;
        }
    }
}

/// One run or session step in flight, counted for [`wanted`]; one whose sandbox has
/// pooled sync tools wakes the thread as it starts, when it is the only one.
pub(crate) struct RunInFlight {
    pooled_tools: bool,
    /// [`CAUGHT`] when this run woke the thread.
    woke: Option<usize>,
}

impl RunInFlight {
    pub(crate) fn start(pooled_tools: bool) -> Self {
        let alone = IN_FLIGHT.fetch_add(1, Ordering::Relaxed) == 0;
        let mut woke = None;
        if pooled_tools {
            WANTING.fetch_add(1, Ordering::Relaxed);
            let probe = STARTED.fetch_add(1, Ordering::Relaxed).is_multiple_of(PROBE_EVERY);
            let may_spin = probe || MISSES.load(Ordering::Relaxed) < MISSES_TO_STOP;
            MAY_SPIN.store(may_spin, Ordering::Relaxed);
            if may_spin && alone {
                if let Some(thread) = thread() {
                    woke = Some(CAUGHT.load(Ordering::Relaxed));
                    if SPUN_AT.load(Ordering::Relaxed) == 0 {
                        thread.unpark();
                    }
                }
            }
        }
        RunInFlight { pooled_tools, woke }
    }
}

impl Drop for RunInFlight {
    fn drop(&mut self) {
        if let Some(caught) = self.woke {
            if CAUGHT.load(Ordering::Relaxed) == caught {
                MISSES.fetch_add(1, Ordering::Relaxed);
            } else {
                MISSES.store(0, Ordering::Relaxed);
            }
        }
        if self.pooled_tools {
            WANTING.fetch_sub(1, Ordering::Relaxed);
        }
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Linux: a call handed to the parked thread wakes it on the caller's core, which spins
/// for the answer while it waits (yielding it), rather than on an idle core that takes
/// long to wake; once running, the thread may go anywhere again.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod placement {
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::sync::OnceLock;

    static TID: AtomicI32 = AtomicI32::new(0);
    static ANYWHERE: OnceLock<libc::cpu_set_t> = OnceLock::new();
    static PINNED: AtomicBool = AtomicBool::new(false);

    const SET_SIZE: usize = size_of::<libc::cpu_set_t>();

    /// On the tool thread as it starts.
    pub(super) fn register() {
        // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes at most
        // SET_SIZE bytes into it; gettid has no preconditions.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, SET_SIZE, &mut set) == 0 && ANYWHERE.set(set).is_ok() {
                TID.store(libc::gettid(), Ordering::Relaxed);
            }
        }
    }

    /// On the caller, before it wakes the thread.
    pub(super) fn near_caller() {
        let tid = TID.load(Ordering::Relaxed);
        if tid == 0 {
            return;
        }
        // SAFETY: sched_getcpu has no preconditions; CPU_SET writes a bit of `set` for a
        // CPU number the kernel gave; sched_setaffinity reads SET_SIZE bytes of `set`.
        unsafe {
            let Ok(cpu) = usize::try_from(libc::sched_getcpu()) else { return };
            // CPU_SET indexes a fixed-size set: a CPU number beyond it would panic.
            if cpu >= SET_SIZE * 8 {
                return;
            }
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(tid, SET_SIZE, &set) == 0 {
                PINNED.store(true, Ordering::Relaxed);
            }
        }
    }

    /// On the thread, once it runs a call.
    pub(super) fn anywhere() {
        if !PINNED.swap(false, Ordering::Relaxed) {
            return;
        }
        if let Some(set) = ANYWHERE.get() {
            // SAFETY: sched_setaffinity reads SET_SIZE bytes of `set`.
            unsafe { libc::sched_setaffinity(0, SET_SIZE, set) };
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod placement {
    pub(super) fn register() {}
    pub(super) fn near_caller() {}
    pub(super) fn anywhere() {}
}
