//! The files a run is given (`/input`) and the files it leaves (`/output`), as the
//! embedder sees them.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::tree;

/// The files a run finds read-only under `/input`, by their path relative to it. Cheap
/// to clone: the bytes are shared, with each run that gets them and with the guest,
/// never copied.
///
/// ```
/// use wasmbox::InputFiles;
/// let mut files = InputFiles::new();
/// files.insert("data.csv", b"a,b\n1,2\n".to_vec()).unwrap();
/// files.insert("config/settings.json", b"{}".to_vec()).unwrap();
/// assert!(files.insert("../escape", b"".to_vec()).is_err());
/// assert_eq!(files.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputFiles {
    files: BTreeMap<String, Arc<[u8]>>,
}

/// Why [`InputFiles::insert`] refused a name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("input file name `{name}`: {reason}")]
#[non_exhaustive]
pub struct InputFileError {
    /// The refused name.
    pub name: String,
    /// Why it was refused.
    pub reason: &'static str,
}

impl InputFiles {
    /// No files: `/input` is an empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file at `name` under `/input` (`"data.csv"`, `"dir/data.csv"`), replacing
    /// one of the same name.
    ///
    /// # Errors
    /// When `name` is empty, absolute, has an empty, `.` or `..` component, a NUL or a
    /// backslash, a component over 255 bytes, nests 64 deep, or would make a file and a
    /// directory of one name (`a` and `a/b`).
    pub fn insert(&mut self, name: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Result<(), InputFileError> {
        let name = name.into();
        let refuse = |reason| Err(InputFileError { name: name.clone(), reason });
        if let Err(reason) = tree::check_relative_name(&name) {
            return refuse(reason);
        }
        let under = format!("{name}/");
        let has_children = self.files.range(under.clone()..).next().is_some_and(|(key, _)| key.starts_with(&under));
        let clash = has_children || name.match_indices('/').any(|(at, _)| self.files.contains_key(&name[..at]));
        if clash {
            return refuse("a file and a directory of the same name");
        }
        self.files.insert(name, bytes.into());
        Ok(())
    }

    /// How many files there are.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The files, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<[u8]>)> {
        self.files.iter().map(|(name, bytes)| (name.as_str(), bytes))
    }

    /// Their total size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|bytes| bytes.len() as u64).sum()
    }
}

/// A file the guest left under `/output`.
///
/// In JSON it is `{"name": …, "text": …}` when its bytes are UTF-8, else
/// `{"name": …, "base64": …}`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputFile {
    /// Its path relative to `/output` (`"report.txt"`, `"charts/a.svg"`), with `/`
    /// between components. Any component may hold characters a host filesystem refuses
    /// or treats specially (`\`, `:`): sanitise before using it as a host path.
    pub name: String,
    /// Its contents.
    pub bytes: Vec<u8>,
}

impl OutputFile {
    /// The contents as text, when they are UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputFileJson<'a> {
    name: std::borrow::Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
}

impl Serialize for OutputFile {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (text, base64) = match self.text() {
            Some(text) => (Some(text.into()), None),
            None => (None, Some(base64::engine::general_purpose::STANDARD.encode(&self.bytes))),
        };
        OutputFileJson { name: self.name.as_str().into(), text, base64 }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for OutputFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = OutputFileJson::deserialize(deserializer)?;
        let bytes = match (json.text, json.base64) {
            (Some(text), None) => text.into_owned().into_bytes(),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| serde::de::Error::custom(format!("output file base64: {e}")))?,
            _ => return Err(serde::de::Error::custom("an output file has either `text` or `base64`")),
        };
        Ok(OutputFile { name: json.name.into_owned(), bytes })
    }
}

/// The input files as a worker request carries them: a list of output-file-shaped
/// entries (text or base64).
impl Serialize for InputFiles {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.files.len()))?;
        for (name, bytes) in &self.files {
            let (text, base64) = match std::str::from_utf8(bytes) {
                Ok(text) => (Some(text.into()), None),
                Err(_) => (None, Some(base64::engine::general_purpose::STANDARD.encode(bytes))),
            };
            seq.serialize_element(&OutputFileJson { name: name.as_str().into(), text, base64 })?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for InputFiles {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut files = InputFiles::new();
        for file in Vec::<OutputFile>::deserialize(deserializer)? {
            files.insert(file.name, file.bytes).map_err(serde::de::Error::custom)?;
        }
        Ok(files)
    }
}
