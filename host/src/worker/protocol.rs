//! The parent ↔ worker wire protocol: length-prefixed JSON frames over the worker's
//! stdin and stdout (no sockets, so it works the same on every OS and through
//! `docker run -i`).
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON, one
//! [`ToWorker`] or [`FromWorker`] message. Every read is capped *before* allocating:
//! the worker caps what the parent sends at [`MAX_REQUEST_FRAME_BYTES`], and the parent
//! caps what a worker sends from the run's own limits ([`max_reply_frame_bytes`]),
//! because the worker hosts untrusted code and is not trusted.
//!
//! A session: the parent sends `hello`, the worker answers `hello` with the same
//! version; then, one run at a time, `run` → any number of (`tool_call` → `tool_result`),
//! (`start_call` → `call_started`) and (`await_any` → `calls_ended`) and, when the run
//! asked for live output, `output` frames (also while a tool call
//! waits) → `outcome`. `cancel` stops the current run; `shutdown` (or closing stdin) ends the
//! worker.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::broker::{CallError, ToolSummary};
use crate::import_check::ImportPolicy;
use crate::limits::Limits;
use crate::live_output::OutputStream;
use crate::outcome::{Outcome, MAX_ERROR_KIND_BYTES, MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_TRACEBACK_BYTES};
use crate::vfs::InputFiles;

/// The protocol version both sides must speak. Bump it on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 2;

/// The largest frame a worker accepts from its parent: code, input and tool results
/// are each capped far below this by [`Limits`].
pub const MAX_REQUEST_FRAME_BYTES: u32 = 64 << 20;

/// Bytes a frame's length prefix takes.
const PREFIX_BYTES: usize = 4;

/// What the parent sends to a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
// One message per run or call: the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum ToWorker {
    /// Opens the session.
    Hello {
        /// The parent's [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// Starts a run; only one run is in flight per worker.
    Run(RunRequest),
    /// The parent broker's answer to a `tool_call`.
    ToolResult {
        /// The id from the `tool_call`.
        call_id: u32,
        /// The result JSON text, or why the call was refused or failed.
        result: Result<String, CallError>,
    },
    /// The parent broker's answer to a `start_call`: the call's id, or why it was refused.
    CallStarted {
        /// The request number from the `start_call`.
        request: u32,
        /// The started call's id, or the refusal.
        result: Result<u32, CallError>,
    },
    /// The parent broker's answer to an `await_any`: the started calls that ended.
    CallsEnded {
        /// The request number from the `await_any`.
        request: u32,
        /// Each ended call's id and answer, oldest first.
        finished: Vec<(u32, Result<String, CallError>)>,
    },
    /// Stops the current run (it ends `cancelled`).
    Cancel,
    /// Ends the session; the worker exits.
    Shutdown,
}

/// What a worker sends to its parent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromWorker {
    /// Answers the parent's `hello`.
    Hello {
        /// The worker's [`PROTOCOL_VERSION`].
        version: u32,
        /// The worker's process id, for diagnostics.
        pid: u32,
    },
    /// The guest called a tool; the parent's broker decides.
    ToolCall {
        /// Numbers the requests of one run (`tool_call`, `start_call`, `await_any`) from 1.
        call_id: u32,
        /// The tool's name, as the guest wrote it.
        name: String,
        /// The arguments, as the guest wrote them (checked by the parent).
        args_json: String,
    },
    /// The guest started a call (`start-call`); the parent's broker decides and starts it.
    StartCall {
        /// Numbers the requests of one run (`tool_call`, `start_call`, `await_any`) from 1.
        request: u32,
        /// The tool's name, as the guest wrote it.
        name: String,
        /// The arguments, as the guest wrote them (checked by the parent).
        args_json: String,
    },
    /// The guest waits for started calls (`await-any`).
    AwaitAny {
        /// Numbers the requests of one run from 1.
        request: u32,
        /// How long to wait at most; none: until one ends (the run's deadline still holds).
        timeout_ms: Option<u32>,
    },
    /// A chunk of the guest's output, sent while the run goes on when the run asked for
    /// live output ([`RunRequest::live_output`]); at most [`MAX_OUTPUT_CHUNK_BYTES`]
    /// bytes. The parent holds the chunks to the run's caps again.
    Output {
        /// Which stream.
        stream: OutputStream,
        /// The bytes, base64 (a chunk may end inside a UTF-8 character).
        base64: String,
    },
    /// The run ended.
    Outcome {
        /// How it ended, as the worker saw it (the parent fills in the tool-call trail).
        outcome: Box<Outcome>,
    },
    /// The worker cannot go on (e.g. a version mismatch); it exits after this.
    Fatal {
        /// Why.
        message: String,
    },
}

/// One run, as the worker needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The guest component file; the parent has precompiled it into the cache.
    pub guest: PathBuf,
    /// The guest's import policy, checked again by the worker when it loads the guest.
    pub policy: ImportPolicy,
    /// The source code.
    pub code: String,
    /// The input, already serialised and checked by the parent.
    pub input_json: String,
    /// The run's limits; the worker enforces them and the parent re-checks tool calls.
    pub limits: Limits,
    /// What `list-tools` shows the guest: the tools in the run's scope.
    pub tools: Vec<ToolSummary>,
    /// The files under the guest's `/input`.
    #[serde(default)]
    pub files: InputFiles,
    /// Whether the worker sends the guest's output as it is written (`output` frames)
    /// as well as in the outcome.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live_output: bool,
}

/// The most bytes one `output` frame carries; a worker splits larger writes.
pub const MAX_OUTPUT_CHUNK_BYTES: usize = 64 << 10;

/// The largest frame the parent accepts from a worker running under `limits`: an
/// outcome holds at most the value, stdout, stderr and the capped error text (JSON
/// escaping can grow text up to six-fold), the output files (up to the file quota), and a tool call at most the argument cap;
/// plus room for the rest.
pub fn max_reply_frame_bytes(limits: &Limits) -> u32 {
    let error_text = (MAX_ERROR_KIND_BYTES + MAX_ERROR_MESSAGE_BYTES + MAX_ERROR_TRACEBACK_BYTES) as u64;
    let payload = limits
        .max_result_bytes
        .saturating_add(limits.max_stdout_bytes)
        .saturating_add(limits.max_stderr_bytes)
        .saturating_add(error_text)
        .saturating_add(limits.max_fs_bytes)
        .max(limits.max_tool_args_bytes);
    let bound = payload.saturating_mul(6).saturating_add(1 << 20);
    u32::try_from(bound).unwrap_or(u32::MAX)
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The pipe failed.
    #[error("worker pipe: {0}")]
    Io(#[from] std::io::Error),
    /// The stream ended inside a frame.
    #[error("the stream ended inside a frame ({got} of {expected} bytes)")]
    Truncated {
        /// Bytes the frame (or its prefix) should have had.
        expected: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// The length prefix announced more than the receiver accepts.
    #[error("a frame of {len} bytes is over the cap of {max} bytes")]
    TooLarge {
        /// The announced length.
        len: u32,
        /// The cap.
        max: u32,
    },
    /// The frame is not a message of this protocol.
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Encodes one frame: the length prefix and the JSON.
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let json = serde_json::to_vec(message).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let len = u32::try_from(json.len()).map_err(|_| FrameError::TooLarge { len: u32::MAX, max: u32::MAX })?;
    let mut frame = Vec::with_capacity(PREFIX_BYTES + json.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&json);
    Ok(frame)
}

/// Decodes the JSON body of one frame.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Writes one frame and flushes it.
pub async fn write_frame<W, T>(writer: &mut W, message: &T) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    writer.write_all(&encode(message)?).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one frame of at most `max_bytes`. `Ok(None)` is a clean end of stream between
/// frames; an end inside a frame is [`FrameError::Truncated`]. The length is checked
/// before anything is allocated for the body.
pub async fn read_frame<R, T>(reader: &mut R, max_bytes: u32) -> Result<Option<T>, FrameError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut prefix = [0u8; PREFIX_BYTES];
    let got = read_full(reader, &mut prefix).await?;
    if got == 0 {
        return Ok(None);
    }
    if got < PREFIX_BYTES {
        return Err(FrameError::Truncated { expected: PREFIX_BYTES, got });
    }
    let len = u32::from_be_bytes(prefix);
    if len > max_bytes {
        return Err(FrameError::TooLarge { len, max: max_bytes });
    }
    let mut body = vec![0u8; len as usize];
    let got = read_full(reader, &mut body).await?;
    if got < body.len() {
        return Err(FrameError::Truncated { expected: body.len(), got });
    }
    decode(&body).map(Some)
}

/// Fills `buf` unless the stream ends first; returns how many bytes arrived.
async fn read_full<R: AsyncRead + Unpin>(reader: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{ErrorDetail, Status};
    use proptest::prelude::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }

    fn read_one<T: DeserializeOwned>(bytes: &[u8], max: u32) -> Result<Option<T>, FrameError> {
        block_on(read_frame(&mut &bytes[..], max))
    }

    fn call_error() -> impl Strategy<Value = CallError> {
        prop_oneof![
            any::<String>().prop_map(CallError::Denied),
            any::<String>().prop_map(CallError::BudgetExhausted),
            any::<String>().prop_map(CallError::InvalidArgs),
            any::<String>().prop_map(CallError::Failed),
            any::<String>().prop_map(CallError::Timeout),
        ]
    }

    fn to_worker() -> impl Strategy<Value = ToWorker> {
        prop_oneof![
            any::<u32>().prop_map(|version| ToWorker::Hello { version }),
            (any::<String>(), any::<String>(), any::<String>()).prop_map(|(code, name, schema)| {
                let live_output = code.len() % 2 == 0;
                ToWorker::Run(RunRequest {
                    guest: PathBuf::from("/guests/python.wasm"),
                    policy: ImportPolicy::AllowInertWasi,
                    code,
                    input_json: "null".into(),
                    limits: Limits::default(),
                    tools: vec![ToolSummary { name, description: String::new(), args_schema: schema }],
                    files: {
                        let mut files = InputFiles::new();
                        files.insert("a.txt", b"text".to_vec()).unwrap();
                        files.insert("dir/b.bin", vec![0xff, 0, 0xfe]).unwrap();
                        files
                    },
                    live_output,
                })
            }),
            (any::<u32>(), prop_oneof![any::<String>().prop_map(Ok), call_error().prop_map(Err)])
                .prop_map(|(call_id, result)| ToWorker::ToolResult { call_id, result }),
            (any::<u32>(), prop_oneof![any::<u32>().prop_map(Ok), call_error().prop_map(Err)])
                .prop_map(|(request, result)| ToWorker::CallStarted { request, result }),
            (
                any::<u32>(),
                proptest::collection::vec(
                    (any::<u32>(), prop_oneof![any::<String>().prop_map(Ok), call_error().prop_map(Err)]),
                    0..4
                )
            )
                .prop_map(|(request, finished)| ToWorker::CallsEnded { request, finished }),
            Just(ToWorker::Cancel),
            Just(ToWorker::Shutdown),
        ]
    }

    fn from_worker() -> impl Strategy<Value = FromWorker> {
        prop_oneof![
            (any::<u32>(), any::<u32>()).prop_map(|(version, pid)| FromWorker::Hello { version, pid }),
            (any::<u32>(), any::<String>(), any::<String>())
                .prop_map(|(call_id, name, args_json)| FromWorker::ToolCall { call_id, name, args_json }),
            (any::<u32>(), any::<String>(), any::<String>())
                .prop_map(|(request, name, args_json)| FromWorker::StartCall { request, name, args_json }),
            (any::<u32>(), any::<Option<u32>>())
                .prop_map(|(request, timeout_ms)| FromWorker::AwaitAny { request, timeout_ms }),
            (any::<String>(), any::<String>()).prop_map(|(stdout, message)| {
                let mut outcome = Outcome::early(Status::Error, ErrorDetail::new("ValueError", message));
                outcome.stdout.text = stdout;
                FromWorker::Outcome { outcome: Box::new(outcome) }
            }),
            any::<String>().prop_map(|message| FromWorker::Fatal { message }),
            (any::<bool>(), any::<String>()).prop_map(|(stderr, base64)| FromWorker::Output {
                stream: if stderr { OutputStream::Stderr } else { OutputStream::Stdout },
                base64,
            }),
        ]
    }

    proptest! {
        #[test]
        fn parent_frames_round_trip(message in to_worker()) {
            let frame = encode(&message).unwrap();
            prop_assert_eq!(read_one::<ToWorker>(&frame, MAX_REQUEST_FRAME_BYTES).unwrap(), Some(message));
        }

        #[test]
        fn worker_frames_round_trip(message in from_worker()) {
            let frame = encode(&message).unwrap();
            prop_assert_eq!(read_one::<FromWorker>(&frame, u32::MAX).unwrap(), Some(message));
        }

        #[test]
        fn every_cut_of_a_frame_is_truncated(message in from_worker(), cut in 1usize..4096) {
            let frame = encode(&message).unwrap();
            let cut = cut % frame.len();
            prop_assume!(cut > 0);
            let err = read_one::<FromWorker>(&frame[..cut], u32::MAX).unwrap_err();
            prop_assert!(matches!(err, FrameError::Truncated { .. }), "{err}");
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = read_one::<FromWorker>(&bytes, 1 << 16);
            let _ = read_one::<ToWorker>(&bytes, 1 << 16);
        }

        #[test]
        fn arbitrary_json_bodies_are_malformed_or_valid(body in "[ -~]{0,200}") {
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(body.as_bytes());
            match read_one::<FromWorker>(&frame, u32::MAX) {
                Ok(Some(_)) | Err(FrameError::Malformed(_)) => {}
                other => prop_assert!(false, "unexpected {other:?}"),
            }
        }

        #[test]
        fn oversized_lengths_are_refused_before_reading(len in 1025u32.., tail in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut frame = len.to_be_bytes().to_vec();
            frame.extend_from_slice(&tail);
            let err = read_one::<FromWorker>(&frame, 1024).unwrap_err();
            let refused = matches!(err, FrameError::TooLarge { len: l, max: 1024 } if l == len);
            prop_assert!(refused);
        }
    }

    fn frame_of(body: &[u8]) -> Vec<u8> {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    #[test]
    fn a_clean_end_between_frames_is_none() {
        assert!(read_one::<ToWorker>(&[], 1024).unwrap().is_none());
        let two = [encode(&ToWorker::Cancel).unwrap(), encode(&ToWorker::Shutdown).unwrap()].concat();
        let mut reader = &two[..];
        block_on(async {
            assert_eq!(read_frame(&mut reader, 1024).await.unwrap(), Some(ToWorker::Cancel));
            assert_eq!(read_frame(&mut reader, 1024).await.unwrap(), Some(ToWorker::Shutdown));
            assert_eq!(read_frame::<_, ToWorker>(&mut reader, 1024).await.unwrap(), None);
        });
    }

    #[test]
    fn malformed_bodies_name_the_problem() {
        let cases: [&[u8]; 6] = [
            b"",
            b"\xff\xfe not utf-8",
            b"[1, 2]",
            br#"{"type": "launch_missiles"}"#,
            br#"{"type": "hello"}"#,
            br#"{"type": "hello", "version": 1, "pid": 2, "extra": true}"#,
        ];
        for body in cases {
            let err = read_one::<FromWorker>(&frame_of(body), 1024).unwrap_err();
            assert!(matches!(err, FrameError::Malformed(_)), "{body:?}: {err}");
        }
    }

    #[test]
    fn a_zero_prefix_then_nothing_is_malformed_not_a_hang() {
        let err = read_one::<FromWorker>(&[0, 0, 0, 0], 1024).unwrap_err();
        assert!(matches!(err, FrameError::Malformed(_)));
    }

    #[test]
    fn the_reply_cap_covers_a_full_outcome() {
        let limits = Limits::default();
        let control = |bytes: usize| "\u{1}".repeat(bytes);
        let error = ErrorDetail {
            kind: control(MAX_ERROR_KIND_BYTES),
            message: control(MAX_ERROR_MESSAGE_BYTES),
            traceback: control(MAX_ERROR_TRACEBACK_BYTES),
        };
        let mut outcome = Outcome::early(Status::Ok, error);
        // Control characters escape to six bytes each: the worst case for a capped stream.
        outcome.stdout.text = "\u{1}".repeat(limits.max_stdout_bytes as usize);
        outcome.stderr.text = "\u{1}".repeat(limits.max_stderr_bytes as usize);
        outcome.value = Some(serde_json::Value::String("\u{1}".repeat(limits.max_result_bytes as usize - 2)));
        let frame = encode(&FromWorker::Outcome { outcome: Box::new(outcome) }).unwrap();
        assert!(frame.len() as u32 <= max_reply_frame_bytes(&limits), "{} bytes", frame.len());
    }
}
