//! `wasmbox run --input-file PATH[:NAME]` and `--output-dir DIR`: host files in, the
//! guest's `/output` out. Reading happens before the run; writing after it, only inside
//! DIR, under sanitised names, never through a symbolic link.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use wasmbox::{InputFiles, OutputFile};

/// Reads each `PATH[:NAME]` into the run's `/input`, as NAME (default: PATH's file name).
/// A PATH that itself names an existing file is taken whole, so `C:\data.csv` works.
pub(crate) fn read_inputs(specs: &[String]) -> Result<InputFiles> {
    let mut files = InputFiles::new();
    let mut seen = HashSet::new();
    for spec in specs {
        let (path, name) = split_spec(spec)?;
        if !seen.insert(name.clone()) {
            bail!("--input-file {spec}: another input file is already named `{name}`");
        }
        let bytes = fs::read(&path).with_context(|| format!("--input-file {spec}: reading {}", path.display()))?;
        files.insert(name, bytes).with_context(|| format!("--input-file {spec}"))?;
    }
    Ok(files)
}

fn split_spec(spec: &str) -> Result<(PathBuf, String)> {
    let whole = Path::new(spec);
    let (path, name) = match spec.rsplit_once(':') {
        Some((path, name)) if !whole.is_file() && !path.is_empty() => (PathBuf::from(path), Some(name.to_owned())),
        _ => (whole.to_owned(), None),
    };
    let name = match name {
        Some(name) => name,
        None => path
            .file_name()
            .and_then(|name| name.to_str())
            .map(str::to_owned)
            .with_context(|| format!("--input-file {spec}: give the file a UTF-8 name with PATH:NAME"))?,
    };
    Ok((path, name))
}

/// Writes the run's output files under `dir` (created if missing). Every name is
/// sanitised component by component ([`sanitise_component`]); an existing symbolic link
/// on the way, or in the place of a file, is an error and nothing is written through it;
/// an existing regular file is replaced. Returns the paths written.
pub(crate) fn write_outputs(dir: &Path, files: &[OutputFile]) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).with_context(|| format!("--output-dir: creating {}", dir.display()))?;
    let mut written = Vec::new();
    // Case-folded, so that two names that one case-insensitive filesystem would merge
    // are caught on every platform.
    let mut taken = HashSet::new();
    for file in files {
        let parts: Vec<String> = file.name.split('/').map(sanitise_component).collect();
        let key = parts.join("/").to_lowercase();
        if !taken.insert(key) {
            bail!("--output-dir: two output files map to the same name `{}` once sanitised", parts.join("/"));
        }
        let mut at = dir.to_owned();
        let (leaf, dirs) = parts.split_last().context("an output file with no name")?;
        for part in dirs {
            at.push(part);
            match fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    bail!("--output-dir: {} is a symbolic link; not writing through it", at.display())
                }
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => bail!("--output-dir: {} exists and is not a directory", at.display()),
                Err(_) => fs::create_dir(&at).with_context(|| format!("--output-dir: creating {}", at.display()))?,
            }
        }
        at.push(leaf);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                bail!("--output-dir: {} is a symbolic link; not writing through it", at.display())
            }
            Ok(meta) if meta.is_file() => {
                fs::remove_file(&at).with_context(|| format!("--output-dir: replacing {}", at.display()))?
            }
            Ok(_) => bail!("--output-dir: {} exists and is not a file", at.display()),
            Err(_) => {}
        }
        // create_new (O_CREAT|O_EXCL) refuses whatever appeared since the check, a
        // symbolic link included, instead of following it.
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&at)
            .with_context(|| format!("--output-dir: creating {}", at.display()))?;
        out.write_all(&file.bytes).with_context(|| format!("--output-dir: writing {}", at.display()))?;
        written.push(at);
    }
    Ok(written)
}

/// One component of a guest-chosen name, made safe as a file name on Linux, macOS and
/// Windows: path separators, `:` and the other characters Windows refuses, and control
/// characters become `_`; a name of dots only, an empty one, one ending in a dot or a
/// space, and Windows' device names (`CON`, `nul.txt`, `COM1`, …) get a `_` too.
pub(crate) fn sanitise_component(part: &str) -> String {
    let mut name: String =
        part.chars()
            .map(|c| {
                if c.is_control() || matches!(c, '\\' | '/' | ':' | '*' | '?' | '"' | '<' | '>' | '|') {
                    '_'
                } else {
                    c
                }
            })
            .collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        name.insert(0, '_');
    }
    if name.ends_with(['.', ' ']) {
        name.push('_');
    }
    let stem = name.split('.').next().unwrap_or("").trim_end().to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$")
        || (stem.len() == 4
            && (stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.as_bytes()[3].is_ascii_digit());
    if device {
        name.insert(0, '_');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe_on_every_platform() {
        assert_eq!(sanitise_component("report.txt"), "report.txt");
        assert_eq!(sanitise_component(".."), "_.._");
        assert_eq!(sanitise_component("."), "_._");
        assert_eq!(sanitise_component(""), "_");
        assert_eq!(sanitise_component("a\\..\\b"), "a_.._b");
        assert_eq!(sanitise_component("c:evil"), "c_evil");
        assert_eq!(sanitise_component("x\u{1b}[31m"), "x_[31m");
        assert_eq!(sanitise_component("CON"), "_CON");
        assert_eq!(sanitise_component("nul.txt"), "_nul.txt");
        assert_eq!(sanitise_component("com1"), "_com1");
        assert_eq!(sanitise_component("trailing. "), "trailing. _");
        assert_eq!(sanitise_component("console"), "console");
    }

    #[test]
    fn an_input_spec_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data.csv");
        fs::write(&file, "x").unwrap();
        let path = file.to_str().unwrap();
        assert_eq!(split_spec(path).unwrap(), (file.clone(), "data.csv".to_owned()));
        assert_eq!(split_spec(&format!("{path}:in/other.csv")).unwrap(), (file.clone(), "in/other.csv".to_owned()));
    }

    #[test]
    fn outputs_stay_inside_the_directory_and_never_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let file = |name: &str, text: &str| {
            serde_json::from_value::<OutputFile>(serde_json::json!({"name": name, "text": text})).unwrap()
        };
        let written = write_outputs(&out, &[file("a/b.txt", "1"), file("..", "2"), file("c:d", "3")]).unwrap();
        assert_eq!(written, [out.join("a").join("b.txt"), out.join("_.._"), out.join("c_d")]);
        assert_eq!(fs::read_to_string(out.join("a/b.txt")).unwrap(), "1");
        assert!(!dir.path().join("2").exists());

        let collide = write_outputs(&out, &[file("x:y", "1"), file("X_y", "2")]).unwrap_err();
        assert!(collide.to_string().contains("same name"), "{collide}");

        #[cfg(unix)]
        {
            let outside = dir.path().join("outside");
            fs::create_dir(&outside).unwrap();
            std::os::unix::fs::symlink(&outside, out.join("link")).unwrap();
            let err = write_outputs(&out, &[file("link/x", "no")]).unwrap_err();
            assert!(err.to_string().contains("symbolic link"), "{err}");
            std::os::unix::fs::symlink(outside.join("target"), out.join("leaf")).unwrap();
            let err = write_outputs(&out, &[file("leaf", "no")]).unwrap_err();
            assert!(err.to_string().contains("symbolic link"), "{err}");
            assert_eq!(fs::read_dir(&outside).unwrap().count(), 0, "nothing written outside");
        }
    }
}
