//! Directories that survive power loss. Creating a directory adds an entry to its parent,
//! and on file systems that lose un-fsynced directory entries (ext4 without `dirsync`, for
//! one) a power cut soon after can take the new directory, and everything acknowledged
//! inside it, away. So every directory the plane creates has its parent fsynced before
//! anything inside it is acknowledged, and the files the plane creates itself (the lock,
//! the database file) have their directory fsynced too. SQLite fsyncs the directory of the
//! journal files it creates on its own.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::faults::Faults;

/// fsyncs the directory `dir` (its entries: names of files and directories in it).
pub fn sync_dir(dir: &Path, trace: Option<&Faults>) -> io::Result<()> {
    File::open(dir)?.sync_all()?;
    if let Some(trace) = trace {
        trace.record(format!("dirsync {}", dir.display()));
    }
    Ok(())
}

/// fsyncs the file `file` (named `path` in the trace).
pub fn sync_file(file: &File, path: &Path, trace: Option<&Faults>) -> io::Result<()> {
    file.sync_all()?;
    if let Some(trace) = trace {
        trace.record(format!("filesync {}", path.display()));
    }
    Ok(())
}

/// Creates `dir` and each missing parent with `mode`, fsyncing the parent of every
/// directory it creates, in order from the top. Returns whether it created anything. A
/// directory that appears meanwhile (another creator) is fine.
pub fn create_dir_all(dir: &Path, mode: u32, trace: Option<&Faults>) -> io::Result<bool> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at {
        match fs::symlink_metadata(path) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(path.to_path_buf());
                at = path.parent().filter(|p| !p.as_os_str().is_empty());
            }
            Err(e) => return Err(e),
        }
    }
    for path in missing.iter().rev() {
        match fs::DirBuilder::new().mode(mode).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(parent, trace)?;
    }
    Ok(!missing.is_empty())
}
