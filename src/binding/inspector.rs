//! `StoreInspector`: the operator's read-only view of a store root.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use napi::bindgen_prelude::{AsyncTask, ToNapiValue, TypeName};
use napi_derive::napi;

use super::convert::{InspectedTask, TaskState, TaskSummary};
use super::{failed_precondition, invalid_arg, plane_error, PlaneCall, Result};
use crate::config;
use crate::plane;
use crate::record;

/// What `StoreInspector.tasks` lists.
#[napi(object)]
pub struct InspectFilter {
    /// Only Tasks in this state (`TASK_STATE_WORKING`; the short `working` is taken too).
    pub state: Option<TaskState>,
    pub principal: Option<String>,
    pub context_id: Option<String>,
    /// At most this many (default `plane::defaults`' 50; the store lists at most 1000).
    pub limit: Option<u32>,
}

/// Counts and sizes of a store (`StoreInspector.stats`).
#[napi(object)]
pub struct StoreStats {
    /// Tasks by state (`TASK_STATE_WORKING`: n), every state listed.
    pub by_state: HashMap<String, u32>,
    pub tasks: u32,
    pub claims: u32,
    pub contexts: u32,
    /// The database with its WAL and shared-memory files, in bytes.
    pub store_bytes: f64,
    /// The oldest Task that is not terminal.
    pub oldest_live_task_id: Option<String>,
    pub oldest_live_created_ms: Option<f64>,
    /// Folders under `sessions/`.
    pub session_folders: u32,
}

type SharedInspector = std::sync::Arc<Mutex<plane::Inspector>>;

/// A read-only view of a store root for the person operating it (the inspection CLI): no
/// root lock, never a write, so it works while the resident runs. It crosses principals:
/// never expose it to callers.
#[napi]
pub struct StoreInspector {
    inner: Mutex<Option<SharedInspector>>,
    root: String,
}

impl StoreInspector {
    fn inspector(&self) -> Result<SharedInspector> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| failed_precondition("the store inspector is closed"))
    }

    fn call<T: ToNapiValue + TypeName + Send + 'static>(
        &self,
        work: impl FnOnce(&plane::Inspector) -> Result<T> + Send + 'static,
    ) -> Result<AsyncTask<PlaneCall<T>>> {
        let inspector = self.inspector()?;
        Ok(PlaneCall::new(move || {
            work(&inspector.lock().unwrap_or_else(|p| p.into_inner()))
        }))
    }
}

#[napi]
impl StoreInspector {
    /// Opens the store at `root` (default: the configured root) read-only; throws when
    /// there is no store there or a newer build wrote it.
    #[napi(factory, catch_unwind)]
    pub fn open(root: Option<String>) -> Result<StoreInspector> {
        config::sqlite_only("the store inspector", &config::process_env)
            .map_err(|e| failed_precondition(e.to_string()))?;
        let root = match root {
            Some(root) => PathBuf::from(root),
            None => {
                config::store_root(&config::process_env).map_err(|e| invalid_arg(e.to_string()))?
            }
        };
        let inspector = plane::Inspector::open(&root).map_err(plane_error)?;
        Ok(StoreInspector {
            inner: Mutex::new(Some(std::sync::Arc::new(Mutex::new(inspector)))),
            root: root.display().to_string(),
        })
    }

    #[napi(getter)]
    pub fn root(&self) -> String {
        self.root.clone()
    }

    /// The newest-status Tasks of every principal that match `filter`.
    #[napi(ts_return_type = "Promise<TaskSummary[]>")]
    pub fn tasks(
        &self,
        filter: Option<InspectFilter>,
    ) -> Result<AsyncTask<PlaneCall<Vec<TaskSummary>>>> {
        let filter = filter.unwrap_or(InspectFilter {
            state: None,
            principal: None,
            context_id: None,
            limit: None,
        });
        let filter = plane::defaults::inspected_tasks(
            filter.state.map(record::TaskState::from),
            filter.principal,
            filter.context_id,
            filter.limit,
        );
        self.call(move |i| {
            Ok(i.tasks(&filter)
                .map_err(plane_error)?
                .into_iter()
                .map(TaskSummary::from)
                .collect())
        })
    }

    /// One Task (all history and artifacts) with its owner, or `null`.
    #[napi(ts_return_type = "Promise<InspectedTask | null>")]
    pub fn task(&self, task_id: String) -> Result<AsyncTask<PlaneCall<Option<InspectedTask>>>> {
        self.call(move |i| {
            i.task(&task_id)
                .map_err(plane_error)?
                .map(InspectedTask::try_from)
                .transpose()
        })
    }

    /// The id of the Task a person named by typing part of its id (any prefix or suffix of
    /// 6+ characters, e.g. the short id shown), or `null` when no Task matches; throws
    /// when several do (naming them) or the text cannot be part of an id.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn resolve_task_id(&self, typed: String) -> Result<AsyncTask<PlaneCall<Option<String>>>> {
        self.call(move |i| i.resolve_task_id(&typed).map_err(plane_error))
    }

    /// The Task's Pi session file, if it has one.
    #[napi(catch_unwind)]
    pub fn session_file(&self, task_id: String) -> Result<Option<String>> {
        let inspector = self.inspector()?;
        let file = inspector
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .session_file(&task_id);
        Ok(file.map(|p| p.display().to_string()))
    }

    /// Counts by state, sizes, the oldest live Task.
    #[napi(ts_return_type = "Promise<StoreStats>")]
    pub fn stats(&self) -> Result<AsyncTask<PlaneCall<StoreStats>>> {
        self.call(|i| {
            let s = i.stats().map_err(plane_error)?;
            Ok(StoreStats {
                by_state: s
                    .by_state
                    .into_iter()
                    .map(|(state, n)| {
                        let name = record::TaskState::parse(state).map_or(state.to_string(), |s| {
                            TaskState::from(s).as_str().to_string()
                        });
                        (name, n as u32)
                    })
                    .collect(),
                tasks: s.tasks as u32,
                claims: s.claims as u32,
                contexts: s.contexts as u32,
                store_bytes: s.store_bytes as f64,
                oldest_live_task_id: s.oldest_live.as_ref().map(|(id, _)| id.clone()),
                oldest_live_created_ms: s.oldest_live.map(|(_, ms)| ms as f64),
                session_folders: s.session_folders as u32,
            })
        })
    }

    /// SQLite's integrity check and the store's own invariants: the problems found, one
    /// sentence each (empty: sound).
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn check(&self) -> Result<AsyncTask<PlaneCall<Vec<String>>>> {
        self.call(|i| i.check().map_err(plane_error))
    }

    /// Closes the read-only connection. Idempotent.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// The short id people see for a Task: its last 8 characters, the random tail of the
/// UUIDv7 (unique in practice; the leading characters are the time, shared by every Task
/// of a minute). `/a2a show` and the CLI find a Task by it.
#[napi(catch_unwind)]
pub fn short_task_id(task_id: String) -> String {
    crate::ids::short_id(&task_id).to_string()
}
