//! Each Task's own Pi session folder, `<root>/sessions/<taskId>/`, kept exactly as long
//! as the Task (see `retention`).
//!
//! On a fleet (a store that keeps sessions in the database, `Store::keeps_sessions`) the
//! session follows its Task: [`TaskPlane::keep_session`] copies the folder's session files
//! into the database when a turn ends, and [`TaskPlane::session_dir`] restores them into
//! the local folder before the next turn, on whichever node works the Task.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{PlaneError, TaskPlane};
use crate::store::{KeptSessionFile, LocalSessionFile, SessionFile, StoreError};

/// The folder of the per-Task Pi sessions inside the store root.
pub const SESSIONS_DIR: &str = "sessions";

/// The most bytes of session files a Task may keep in a fleet's database (all its `.jsonl`
/// files together). A session past it is not kept (the turn end says why); a Task's
/// session is one conversation, far below this unless a tool pasted whole files into it.
pub const MAX_KEPT_SESSION_BYTES: u64 = 32 * 1024 * 1024;

/// The Pi session file of a Task under the store `root` (the newest `.jsonl` in
/// `sessions/<taskId>/`), if it has one.
pub fn session_file(root: &Path, task_id: &str) -> Option<PathBuf> {
    let mut files = session_files(&root.join(SESSIONS_DIR).join(task_id)).ok()?;
    files.sort();
    files.pop()
}

/// The `.jsonl` files directly in `dir` (none when it does not exist).
fn session_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|x| x == "jsonl") && path.is_file() {
            files.push(path);
        }
    }
    Ok(files)
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> PlaneError {
    PlaneError::Store(StoreError::Io {
        path: path.to_path_buf(),
        message: format!("{what}: {e}"),
    })
}

/// The rule of what a fleet keeps of a Task's session: every `.jsonl` file of its folder,
/// together at most [`MAX_KEPT_SESSION_BYTES`]; more is refused, naming the Task, the size
/// and the limit.
pub fn kept_session_files(dir: &Path, task_id: &str) -> Result<Vec<SessionFile>, PlaneError> {
    let mut paths =
        session_files(dir).map_err(|e| io_error(dir, "cannot list the session folder", e))?;
    paths.sort();
    let mut total: u64 = 0;
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let size = std::fs::metadata(&path)
            .map_err(|e| io_error(&path, "cannot read the session file", e))?
            .len();
        total += size;
        if total > MAX_KEPT_SESSION_BYTES {
            return Err(PlaneError::FailedPrecondition(format!(
                "the Pi session of task {task_id} ({}) has more than {} MiB of session files, the most a fleet \
                 keeps in its database: it is not kept, so another node would work the Task without its \
                 conversation; shorten what the Task's tools put into the session",
                dir.display(),
                MAX_KEPT_SESSION_BYTES / (1024 * 1024)
            )));
        }
        let body =
            std::fs::read(&path).map_err(|e| io_error(&path, "cannot read the session file", e))?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                PlaneError::FailedPrecondition(format!(
                    "session file {} has a name that is not UTF-8; a fleet keeps only UTF-8 names",
                    path.display()
                ))
            })?
            .to_string();
        files.push(SessionFile { name, body });
    }
    Ok(files)
}

/// A kept file's name is one `.jsonl` file name: never a path out of the Task's folder.
fn is_session_file_name(name: &str) -> bool {
    name.ends_with(".jsonl") && !name.starts_with('.') && !name.contains(['/', '\\', '\0'])
}

/// The node's own copies of a Task's session files, by name with their content addresses
/// (what [`restore_session_files`] need not be sent again).
pub fn local_session_files(dir: &Path) -> Result<Vec<LocalSessionFile>, PlaneError> {
    let mut local = Vec::new();
    for path in
        session_files(dir).map_err(|e| io_error(dir, "cannot list the session folder", e))?
    {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let body =
            std::fs::read(&path).map_err(|e| io_error(&path, "cannot read the session file", e))?;
        local.push(LocalSessionFile {
            name: name.to_string(),
            digest: crate::digest::content_address(&body),
        });
    }
    Ok(local)
}

/// The rule of restoring: the database's copy is the Task's session. Each kept file that
/// comes with a body (its local copy is missing or differs: older, or written by a turn
/// that never ended) is written (to a temporary name, fsynced, renamed, the folder
/// fsynced); one without (it equals the local copy) is left; a local `.jsonl` the database
/// does not keep is removed, so Pi finds exactly the kept session. Nothing is done when the
/// database keeps no file (the Task's first turn). Returns how many files were written or
/// removed.
pub fn restore_session_files(dir: &Path, kept: &[KeptSessionFile]) -> Result<usize, PlaneError> {
    if kept.is_empty() {
        return Ok(0);
    }
    let mut changed = 0;
    for file in kept {
        if !is_session_file_name(&file.name) {
            return Err(PlaneError::Store(StoreError::Corrupt(format!(
                "the database keeps a session file named {:?} for {}: not a .jsonl file name",
                file.name,
                dir.display()
            ))));
        }
        let Some(body) = &file.body else {
            continue;
        };
        let path = dir.join(&file.name);
        let temporary = dir.join(format!(".{}.restoring", file.name));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)
            .map_err(|e| io_error(&temporary, "cannot write the restored session file", e))?;
        out.write_all(body)
            .and_then(|()| out.sync_all())
            .map_err(|e| io_error(&temporary, "cannot write the restored session file", e))?;
        std::fs::rename(&temporary, &path)
            .map_err(|e| io_error(&path, "cannot put the restored session file in place", e))?;
        changed += 1;
    }
    for path in
        session_files(dir).map_err(|e| io_error(dir, "cannot list the session folder", e))?
    {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !kept.iter().any(|f| f.name == name) {
            std::fs::remove_file(&path).map_err(|e| {
                io_error(
                    &path,
                    "cannot remove a session file the database does not keep",
                    e,
                )
            })?;
            changed += 1;
        }
    }
    if changed > 0 {
        crate::store::durable::sync_dir(dir, None)
            .map_err(|e| io_error(dir, "cannot sync the session folder", e))?;
    }
    Ok(changed)
}

impl TaskPlane {
    /// The folder of a Task's own Pi session, `<root>/sessions/<taskId>/`, created (mode
    /// 0700, each new folder's parent fsynced) if needed: losing it to a power cut would
    /// lose the Task's session. Only for a Task that exists. On a fleet the session the
    /// database keeps is restored into it first ([`restore_session_files`]).
    pub fn session_dir(&self, task_id: &str) -> Result<PathBuf, PlaneError> {
        if self.task(task_id, Some(0), false)?.is_none() {
            return Err(PlaneError::TaskNotFound(task_id.to_string()));
        }
        // Task ids are identifiers (no `/`, never `.` or `..`): one path component.
        crate::ids::check_identifier("taskId", task_id)?;
        let dir = self.root().join(SESSIONS_DIR).join(task_id);
        self.store.create_dir_durably(&dir)?;
        if self.store.keeps_sessions() {
            let local = local_session_files(&dir)?;
            let kept = self.read(|tx| Ok(tx.task_session_files(task_id, &local)?))?;
            let changed = restore_session_files(&dir, &kept)?;
            if changed > 0 {
                crate::log::event(
                    "a2a_session_restored",
                    serde_json::json!({ "taskId": task_id, "files": changed }),
                );
            }
        }
        Ok(dir)
    }

    /// On a fleet, keeps the Task's session files in the database (one transaction), so
    /// the node that works the Task next resumes its conversation; called when a turn
    /// ends, before the turn's end is recorded. Returns whether anything was kept (never
    /// on a store whose sessions stay local, nor for a Task with no session folder).
    pub fn keep_session(&self, task_id: &str) -> Result<bool, PlaneError> {
        if !self.store.keeps_sessions() {
            return Ok(false);
        }
        crate::ids::check_identifier("taskId", task_id)?;
        let dir = self.root().join(SESSIONS_DIR).join(task_id);
        let files = kept_session_files(&dir, task_id)?;
        if files.is_empty() {
            return Ok(false);
        }
        let task_id = task_id.to_string();
        self.write(move |tx| Ok(tx.keep_task_session(&task_id, &files)?))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch folder removed when dropped.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new() -> Scratch {
            let dir = std::env::temp_dir().join(format!("tp-session-{}", crate::ids::mint()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn file(name: &str, body: &str) -> SessionFile {
        SessionFile {
            name: name.into(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn kept(name: &str, body: Option<&str>) -> KeptSessionFile {
        KeptSessionFile {
            name: name.into(),
            body: body.map(|b| b.as_bytes().to_vec()),
        }
    }

    #[test]
    fn restore_session_files_makes_the_local_folder_the_kept_session() {
        let dir = Scratch::new();
        let d = dir.path();
        // Nothing kept (a first turn): the local folder is left alone.
        std::fs::write(d.join("a.jsonl"), "local\n").unwrap();
        assert_eq!(restore_session_files(d, &[]).unwrap(), 0);
        assert_eq!(
            std::fs::read_to_string(d.join("a.jsonl")).unwrap(),
            "local\n"
        );
        // A differing copy is replaced, a missing one written, a stray one removed, one
        // equal to the local copy (no body) left.
        std::fs::write(d.join("stray.jsonl"), "x\n").unwrap();
        std::fs::write(d.join("same.jsonl"), "same\n").unwrap();
        std::fs::write(d.join("notes.txt"), "kept\n").unwrap();
        let files = [
            kept("a.jsonl", Some("one\ntwo\n")),
            kept("b.jsonl", Some("b\n")),
            kept("same.jsonl", None),
        ];
        assert_eq!(restore_session_files(d, &files).unwrap(), 3);
        assert_eq!(
            std::fs::read_to_string(d.join("a.jsonl")).unwrap(),
            "one\ntwo\n"
        );
        assert_eq!(std::fs::read_to_string(d.join("b.jsonl")).unwrap(), "b\n");
        assert_eq!(
            std::fs::read_to_string(d.join("same.jsonl")).unwrap(),
            "same\n"
        );
        assert!(!d.join("stray.jsonl").exists());
        assert!(
            d.join("notes.txt").exists(),
            "only .jsonl files are the session's"
        );
        // The local copies' addresses are what a read sends so that equal files come back
        // without a body.
        let local = local_session_files(d).unwrap();
        let a = local.iter().find(|f| f.name == "a.jsonl").unwrap();
        assert_eq!(a.digest, crate::digest::content_address(b"one\ntwo\n"));
        assert_eq!(local.len(), 3);
        // A name that is not one .jsonl file name is refused, never followed.
        let err = restore_session_files(d, &[kept("../x.jsonl", Some(""))]).unwrap_err();
        assert!(err.to_string().contains("not a .jsonl file name"), "{err}");
    }

    #[test]
    fn kept_session_files_are_the_jsonl_files_within_the_size_limit() {
        let dir = Scratch::new();
        let d = dir.path();
        assert!(kept_session_files(&d.join("missing"), "t")
            .unwrap()
            .is_empty());
        std::fs::write(d.join("b.jsonl"), "b\n").unwrap();
        std::fs::write(d.join("a.jsonl"), "a\n").unwrap();
        std::fs::write(d.join("other.txt"), "no\n").unwrap();
        let files = kept_session_files(d, "t").unwrap();
        assert_eq!(files, [file("a.jsonl", "a\n"), file("b.jsonl", "b\n")]);
        let big = std::fs::File::create(d.join("c.jsonl")).unwrap();
        big.set_len(MAX_KEPT_SESSION_BYTES).unwrap();
        let err = kept_session_files(d, "t-1").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("task t-1") && text.contains("32 MiB"),
            "{text}"
        );
    }
}
