//! Instances prepared off the request path: each [`Runtime`](crate::Runtime) keeps up
//! to [`EngineConfig::prepared_instances`](crate::EngineConfig::prepared_instances)
//! guest instances instantiated ahead of its runs, and a finished run's instance is
//! dropped (its pool slot reset) after the outcome is returned, both by one
//! engine-owned background thread ([`Preparer`]). A run takes a prepared instance when
//! there is one that fits its limits, fills in its own state (WASI context and output
//! captures, files, broker, memory limit, deadline, cancel token, fuel), and runs on
//! it; with none ready it instantiates inline as before and never waits for the
//! background. Every prepared instance comes fresh from the runtime's `InstancePre`
//! and serves exactly one run: nothing is reused across runs.
//!
//! # Security
//! A prepared instance is instantiated with placeholder state that refuses everything
//! a guest could reach during instantiation (zero-byte output caps, a broker that
//! refuses and notes the call, empty files); an instance whose instantiation called the
//! host in a way that left a trace (a resource in its table, a tool call, output) is
//! never used, and its runtime stops preparing instances, so a run sees exactly what a
//! fresh inline instance would show it. What the instance already holds counts against
//! the run's `max_memory_bytes` and fuel budget, as the inline instantiation would have;
//! a run whose limits are below that takes the inline path (SECURITY.md, "Prepared
//! instances").
//!
//! The instances waiting here, prepared or finished, take pool slots of their own:
//! the engine's pool holds [`SPARE_SLOTS_PER_PREPARED`] × `prepared_instances` slots
//! more than its admitted runs can use, and nothing waits here without one of them, so
//! the admitted runs' share of the pool is untouched.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use wasmtime::component::ResourceTable;
use wasmtime::Store;

use crate::bindings::{CodeRunner, CodeRunnerPre};
use crate::broker::link::{GuestBroker, RemoteBroker};
use crate::broker::{CallError, ToolSummary};
use crate::cancel::CancelToken;
use crate::limits::Limits;
use crate::live_output::OutputStream;
use crate::output_capture::OutputCapture;
use crate::run_state::{MemoryGuard, RunState};
use crate::vfs::{InputFiles, Vfs};
use crate::wasi;

/// Pool slots the engine adds per [`EngineConfig::prepared_instances`]
/// (crate::EngineConfig::prepared_instances): room for the prepared instances of a few
/// runtimes (one per language, typically) and for finished instances waiting for their
/// reset. A runtime that finds no spare slot goes without a prepared instance; a
/// finished instance that finds none is dropped inline.
pub(crate) const SPARE_SLOTS_PER_PREPARED: u32 = 4;

/// How long a background instantiation may compute: a guest whose instantiation runs
/// longer is not prepared ahead (its runs instantiate inline, within their deadline).
const PREPARE_TIMEOUT: Duration = Duration::from_secs(1);

/// The background thread's nice value on Linux: it runs when a core is free, and
/// gives way to the runs when none is.
#[cfg(target_os = "linux")]
const BACKGROUND_NICE: i32 = 10;

/// The engine's background thread and its queue: fills runtimes' sets of prepared
/// instances and drops finished runs' Stores. Stops and is joined when dropped.
pub(crate) struct Preparer {
    shared: Arc<Shared>,
    /// Instances per runtime; 0 disables preparing and deferred drops alike.
    per_runtime: usize,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    spare: Arc<SpareSlots>,
}

#[derive(Default)]
struct Queue {
    /// Sets to fill, oldest request first (a set gone meanwhile is skipped).
    refill: VecDeque<Weak<PreparedSet>>,
    /// Finished runs' Stores to drop.
    retired: Vec<Retired>,
    stop: bool,
    /// The thread waits on `wake`: only then does new work need a notification, a
    /// system call on the request path (the thread looks at the queue before it waits).
    waiting: bool,
}

/// A finished run's Store and the spare slot it holds until it is dropped (the fields
/// drop in this order).
struct Retired {
    _store: Store<RunState>,
    _slot: SpareSlot,
}

/// The engine's spare pool slots not held by a prepared or finished instance.
struct SpareSlots {
    free: AtomicUsize,
}

/// One spare slot, given back when dropped.
struct SpareSlot(Arc<SpareSlots>);

impl SpareSlots {
    fn take(self: &Arc<Self>) -> Option<SpareSlot> {
        let mut free = self.free.load(Ordering::Acquire);
        loop {
            let left = free.checked_sub(1)?;
            match self.free.compare_exchange_weak(free, left, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(SpareSlot(Arc::clone(self))),
                Err(now) => free = now,
            }
        }
    }
}

impl Drop for SpareSlot {
    fn drop(&mut self) {
        self.0.free.fetch_add(1, Ordering::AcqRel);
    }
}

impl Preparer {
    /// Starts the thread for an engine whose runtimes each keep `per_runtime` instances
    /// prepared, with `per_runtime` × [`SPARE_SLOTS_PER_PREPARED`] spare pool slots. With
    /// `per_runtime == 0` no thread starts.
    pub(crate) fn start(per_runtime: usize) -> std::io::Result<Self> {
        let spare = per_runtime.saturating_mul(SPARE_SLOTS_PER_PREPARED as usize);
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            wake: Condvar::new(),
            spare: Arc::new(SpareSlots { free: AtomicUsize::new(spare) }),
        });
        let thread = if per_runtime == 0 {
            None
        } else {
            let shared = Arc::clone(&shared);
            Some(std::thread::Builder::new().name("wasmbox-prepare".into()).spawn(move || background(&shared))?)
        };
        Ok(Preparer { shared, per_runtime, thread })
    }

    /// A new runtime's (empty) set of prepared instances of `pre`, filling in the
    /// background from now on.
    pub(crate) fn set_for(&self, pre: &CodeRunnerPre<RunState>, meters_fuel: bool) -> Arc<PreparedSet> {
        let set = Arc::new(PreparedSet {
            pre: pre.clone(),
            meters_fuel,
            target: self.per_runtime,
            ready: Mutex::default(),
            queued: AtomicBool::new(false),
            usable: AtomicBool::new(self.per_runtime > 0),
        });
        self.request_refill(&set);
        set
    }

    /// Takes a prepared instance of `set` that fits a run with `limits`, fuelled for it,
    /// and asks for another. `None` when none is ready or fits: the run instantiates
    /// inline.
    pub(crate) fn take(&self, set: &Arc<PreparedSet>, limits: &Limits) -> Option<Taken> {
        if !set.usable.load(Ordering::Acquire) {
            return None;
        }
        let taken = set.take(limits);
        self.request_refill(set);
        taken
    }

    /// Drops `store` on the background thread when it has no other Store waiting and
    /// a spare slot is free, else here: a thread that falls behind does not gather
    /// finished instances.
    pub(crate) fn retire(&self, store: Store<RunState>) {
        if self.thread.is_none() {
            return;
        }
        let mut queue = self.shared.lock();
        if queue.stop || !queue.retired.is_empty() {
            return;
        }
        let Some(slot) = self.shared.spare.take() else { return };
        queue.retired.push(Retired { _store: store, _slot: slot });
        self.shared.notify(queue);
    }

    fn request_refill(&self, set: &Arc<PreparedSet>) {
        if self.thread.is_none() || set.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        if set.ready_len() >= set.target {
            set.queued.store(false, Ordering::Release);
            return;
        }
        let mut queue = self.shared.lock();
        queue.refill.push_back(Arc::downgrade(set));
        self.shared.notify(queue);
    }
}

impl Drop for Preparer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // The engine's last handle may be dropped by a Store this thread drops.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still consistent.
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Releases `queue`, into which work was just put, and wakes the thread if it waits.
    fn notify(&self, queue: MutexGuard<'_, Queue>) {
        let waiting = queue.waiting;
        drop(queue);
        if waiting {
            self.wake.notify_one();
        }
    }
}

/// The background loop: fills sets first (the next run's latency depends on them),
/// then drops finished Stores; on stop, drops what is queued and returns.
fn background(shared: &Arc<Shared>) {
    // Work off the request path yields to the runs when the cores are busy: on Linux
    // the nice value is the thread's own.
    #[cfg(target_os = "linux")]
    let _ = rustix::process::setpriority_process(None, BACKGROUND_NICE);
    enum Work {
        Refill(Arc<PreparedSet>),
        Retire(Retired),
    }
    loop {
        let work = {
            let mut queue = shared.lock();
            loop {
                if !queue.stop {
                    if let Some(set) = queue.refill.pop_front() {
                        match set.upgrade() {
                            Some(set) => break Work::Refill(set),
                            None => continue,
                        }
                    }
                }
                if let Some(retired) = queue.retired.pop() {
                    break Work::Retire(retired);
                }
                if queue.stop {
                    queue.refill.clear();
                    return;
                }
                queue.waiting = true;
                queue = shared.wake.wait(queue).unwrap_or_else(|poisoned| poisoned.into_inner());
                queue.waiting = false;
            }
        };
        match work {
            Work::Refill(set) => set.fill(&shared.spare),
            Work::Retire(retired) => drop(retired),
        }
    }
}

/// One runtime's prepared instances.
pub(crate) struct PreparedSet {
    pre: CodeRunnerPre<RunState>,
    meters_fuel: bool,
    target: usize,
    ready: Mutex<Vec<Prepared>>,
    /// A refill of this set is queued or running.
    queued: AtomicBool,
    /// False once an instantiation failed or left a trace: its runs instantiate inline.
    usable: AtomicBool,
}

/// An instance instantiated ahead of its run.
struct Prepared {
    store: Store<RunState>,
    runner: CodeRunner,
    /// Fuel the instantiation consumed (0 without metering).
    fuel_spent: u64,
    _slot: SpareSlot,
}

/// A prepared instance taken by a run, fuelled for it; [`Taken::start`] gives it the
/// run's state.
pub(crate) struct Taken {
    store: Store<RunState>,
    runner: CodeRunner,
    fuel: u64,
}

impl Taken {
    /// The instance's Store holding `state` (the run's own, from `execution`), its
    /// runner, and the run's fuel budget as `execution::refuel` reports it: what the
    /// guest used is this less what is left, the instantiation included.
    pub(crate) fn start(self, mut state: RunState, limits: &Limits) -> (Store<RunState>, CodeRunner, u64) {
        let Taken { mut store, runner, fuel } = self;
        // What the instantiation took counts as the inline one's would have.
        state.memory = store.data().memory.resumed(limits.max_memory_bytes);
        let placeholder = std::mem::replace(store.data_mut(), state);
        drop(placeholder);
        // The epoch deadline counts from when it is set: from now, not from preparing.
        store.set_epoch_deadline(1);
        (store, runner, fuel)
    }
}

impl PreparedSet {
    fn lock(&self) -> MutexGuard<'_, Vec<Prepared>> {
        self.ready.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn ready_len(&self) -> usize {
        self.lock().len()
    }

    fn take(&self, limits: &Limits) -> Option<Taken> {
        let budget = limits.fuel.unwrap_or(u64::MAX);
        let mut ready = self.lock();
        // The newest first: its pages are the likeliest to be warm in the cache.
        let index = ready.iter().rposition(|prepared| {
            prepared.fuel_spent <= budget && prepared.store.data().memory.fits(limits.max_memory_bytes)
        })?;
        let Prepared { mut store, runner, fuel_spent, _slot } = ready.swap_remove(index);
        drop(ready);
        if self.meters_fuel && store.set_fuel(budget - fuel_spent).is_err() {
            // Not on a metering engine; the inline path reports it.
            return None;
        }
        Some(Taken { store, runner, fuel: budget })
    }

    /// Prepares instances until the set holds its target, the spare slots run out, or
    /// an instantiation fails or leaves a trace (then the set stops preparing).
    fn fill(&self, spare: &Arc<SpareSlots>) {
        // Requests from here on queue another fill, so none is lost to this one ending.
        self.queued.store(false, Ordering::Release);
        while self.usable.load(Ordering::Acquire) && self.ready_len() < self.target {
            let Some(slot) = spare.take() else { return };
            match self.prepare(slot) {
                Ok(prepared) => self.lock().push(prepared),
                Err(reason) => {
                    tracing::debug!(%reason, "runs of this guest instantiate inline: it cannot be prepared ahead");
                    self.usable.store(false, Ordering::Release);
                }
            }
        }
    }

    fn prepare(&self, slot: SpareSlot) -> Result<Prepared, String> {
        let (state, outputs, called) = placeholder_state();
        let mut store = crate::execution::store_with(self.pre.engine(), state);
        let budget = u64::MAX;
        if self.meters_fuel {
            store.set_fuel(budget).map_err(|err| format!("setting fuel: {err}"))?;
        }
        store.data_mut().deadline = Instant::now() + PREPARE_TIMEOUT;
        let runner = futures::executor::block_on(self.pre.instantiate_async(&mut store))
            .map_err(|err| format!("instantiating: {err:#}"))?;
        let data = store.data();
        let wrote = |capture: &OutputCapture| {
            let output = capture.snapshot();
            !output.text.is_empty() || output.truncated
        };
        let traced = !data.table.is_empty() || called.load(Ordering::Acquire) || outputs.iter().any(wrote);
        if traced {
            return Err("its instantiation called the host".into());
        }
        let fuel_spent = if self.meters_fuel { budget - store.get_fuel().unwrap_or(budget) } else { 0 };
        Ok(Prepared { store, runner, fuel_spent, _slot: slot })
    }
}

/// The state a prepared instance is instantiated with, every part of which a run
/// replaces: output captures that hold nothing (the first byte written traps), no
/// files, a broker that refuses every call and notes it, no memory limit beyond the
/// pool's. Returns the captures and the broker's note too.
fn placeholder_state() -> (RunState, [OutputCapture; 2], Arc<AtomicBool>) {
    let stdout = OutputCapture::new(OutputStream::Stdout, 0);
    let stderr = OutputCapture::new(OutputStream::Stderr, 0);
    let called = Arc::new(AtomicBool::new(false));
    let state = RunState {
        wasi: wasi::deny_all_ctx(stdout.clone(), stderr.clone()),
        table: ResourceTable::new(),
        vfs: Vfs::new(0, 0, InputFiles::new()),
        broker: GuestBroker::Remote(Box::new(NoBroker { called: Arc::clone(&called) })),
        memory: MemoryGuard::new(u64::MAX),
        deadline: Instant::now(),
        cancel: CancelToken::new(),
    };
    (state, [stdout, stderr], called)
}

/// The broker of a Store no run owns (a prepared instance before its run, a finished
/// one after it): lists nothing, refuses every call and notes that it was called.
pub(crate) struct NoBroker {
    called: Arc<AtomicBool>,
}

impl NoBroker {
    /// A broker that refuses everything, for a Store whose run took its own broker out.
    pub(crate) fn guest_broker() -> GuestBroker {
        GuestBroker::Remote(Box::new(NoBroker { called: Arc::default() }))
    }

    fn refuse(&self) -> CallError {
        self.called.store(true, Ordering::Release);
        CallError::Denied("no run owns this instance".into())
    }
}

impl RemoteBroker for NoBroker {
    fn list(&self) -> Vec<ToolSummary> {
        self.called.store(true, Ordering::Release);
        Vec::new()
    }

    fn call<'a>(&'a mut self, _name: &'a str, _args_json: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        let refused = self.refuse();
        Box::pin(async move { Err(refused) })
    }

    fn start_call<'a>(&'a mut self, _name: &'a str, _args_json: &'a str) -> BoxFuture<'a, Result<u32, CallError>> {
        let refused = self.refuse();
        Box::pin(async move { Err(refused) })
    }

    fn await_any(&mut self, _timeout: Option<Duration>) -> BoxFuture<'_, Vec<(u32, Result<String, CallError>)>> {
        self.called.store(true, Ordering::Release);
        Box::pin(async { Vec::new() })
    }
}
