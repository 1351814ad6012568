//! The worker protocol's frame reader and decoder, on both sides of the pipe: a parent
//! reading a compromised worker's frames (`FromWorker`) and a worker reading its
//! parent's (`ToWorker`).
//!
//! Input: one selector byte (which side, which cap), then the byte stream as it would
//! arrive on the pipe. Frames are read until the stream ends or a read fails, exactly as
//! a session does. Checked: no panic, the errors say what happened (a `TooLarge` frame
//! is over its cap, a `Truncated` one is short), and every decoded message survives
//! `encode` → `decode` (a parent's message unchanged).

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmbox::worker::protocol::{self, FrameError, FromWorker, ToWorker};
use wasmbox::Limits;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("a runtime"))
}

/// The cap a reader applies, chosen by the selector: tiny, exactly the stream, the
/// parent's cap for a worker under default limits, and the worker's cap for its parent.
fn cap(selector: u8, stream: &[u8]) -> u32 {
    match selector % 4 {
        0 => 64,
        1 => u32::try_from(stream.len()).unwrap_or(u32::MAX),
        2 => protocol::max_reply_frame_bytes(&Limits::default()),
        _ => protocol::MAX_REQUEST_FRAME_BYTES,
    }
}

/// Reads frames of `T` from `stream` until it ends or a read fails; hands each to `check`.
fn session<T: serde::de::DeserializeOwned>(mut stream: &[u8], cap: u32, check: impl Fn(T)) {
    loop {
        let before = stream.len();
        match runtime().block_on(protocol::read_frame::<_, T>(&mut stream, cap)) {
            Ok(Some(message)) => {
                // Each frame consumes its prefix at least, so the loop ends.
                assert!(stream.len() + 4 <= before, "a frame consumed fewer bytes than its prefix");
                check(message);
            }
            Ok(None) => {
                assert_eq!(before, 0, "a clean end with {before} bytes left");
                return;
            }
            Err(FrameError::TooLarge { len, max }) => {
                assert!(len > max && max == cap, "TooLarge for {len} bytes under a cap of {max} (cap {cap})");
                return;
            }
            Err(FrameError::Truncated { expected, got }) => {
                assert!(got < expected, "Truncated with {got} of {expected} bytes");
                return;
            }
            Err(FrameError::Malformed(_)) => return,
            Err(err) => panic!("reading from a byte slice failed with {err:?}"),
        }
    }
}

fn check_to_worker(message: ToWorker) {
    let frame = protocol::encode(&message).expect("a decoded message encodes");
    let again: ToWorker = protocol::decode(&frame[4..]).expect("an encoded message decodes");
    assert_eq!(again, message, "ToWorker changed through encode/decode");
}

fn check_from_worker(message: FromWorker) {
    let frame = protocol::encode(&message).expect("a decoded message encodes");
    // Outcomes carry floats, which serde_json's default parser may read back a unit in
    // the last place off: only that the message decodes again is checked.
    let _: FromWorker = protocol::decode(&frame[4..]).expect("an encoded message decodes");
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else { return };
    let cap = cap(selector, stream);
    if selector & 0x80 == 0 {
        session(stream, cap, check_to_worker);
        if let Ok(message) = protocol::decode::<ToWorker>(stream) {
            check_to_worker(message);
        }
    } else {
        session(stream, cap, check_from_worker);
        if let Ok(message) = protocol::decode::<FromWorker>(stream) {
            check_from_worker(message);
        }
    }
});
