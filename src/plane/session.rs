//! Each Task's own Pi session folder, `<root>/sessions/<taskId>/`, kept exactly as long
//! as the Task (see `retention`).

use std::path::{Path, PathBuf};

use super::{PlaneError, TaskPlane};

/// The folder of the per-Task Pi sessions inside the store root.
pub const SESSIONS_DIR: &str = "sessions";

/// The Pi session file of a Task under the store `root` (the newest `.jsonl` in
/// `sessions/<taskId>/`), if it has one.
pub fn session_file(root: &Path, task_id: &str) -> Option<PathBuf> {
    let dir = root.join(SESSIONS_DIR).join(task_id);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files.pop()
}

impl TaskPlane {
    /// The folder of a Task's own Pi session, `<root>/sessions/<taskId>/`, created (mode
    /// 0700, each new folder's parent fsynced) if needed: losing it to a power cut would
    /// lose the Task's session. Only for a Task that exists.
    pub fn session_dir(&self, task_id: &str) -> Result<PathBuf, PlaneError> {
        if self.task(task_id, Some(0), false)?.is_none() {
            return Err(PlaneError::TaskNotFound(task_id.to_string()));
        }
        // Task ids are identifiers (no `/`, never `.` or `..`): one path component.
        crate::ids::check_identifier("taskId", task_id)?;
        let dir = self.root().join(SESSIONS_DIR).join(task_id);
        self.store.create_dir_durably(&dir)?;
        Ok(dir)
    }
}
