//! Retention while the plane stays open: hourly on the plane's clock, and on demand
//! (SIGHUP), under an injected clock.

mod common;

use a2a_task_plane::clock::{ManualClock, DAY_MS};
use a2a_task_plane::plane::{RETENTION_EVERY_MS, RETENTION_MS};
use common::*;

const MINUTE_MS: i64 = 60 * 1000;

#[test]
fn retention_runs_hourly_while_open_and_prunes_without_a_restart() {
    let tmp = TempRoot::new("ret-periodic");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    assert_eq!(plane.compact_if_due().unwrap(), None, "it ran at open");
    let task = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.complete(&task, vec![], Some(agent("done"))).unwrap();
    let folder = tmp.store().join("sessions").join(&task);
    std::fs::create_dir_all(&folder).unwrap();

    clock.advance(RETENTION_EVERY_MS - MINUTE_MS);
    assert_eq!(plane.compact_if_due().unwrap(), None, "not yet an hour");
    clock.advance(MINUTE_MS);
    let report = plane.compact_if_due().unwrap().expect("an hour passed");
    assert_eq!(report.tasks, 0, "the Task settled less than 30 days ago");
    assert!(plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .is_some());

    clock.advance(RETENTION_MS);
    let report = plane.compact_if_due().unwrap().expect("due again");
    assert_eq!(report.tasks, 1);
    assert_eq!(report.sessions, 1, "its session folder went with it");
    assert!(plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .is_none());
    assert!(!folder.exists());
    assert_eq!(plane.compact_if_due().unwrap(), None, "once per hour");
}

#[test]
fn retention_on_demand_runs_at_once_and_restarts_the_hour() {
    let tmp = TempRoot::new("ret-demand");
    let clock = ManualClock::new(T0);
    let plane = open_with_clock(&tmp.store(), &clock);
    let task = plane
        .accept_in_context("alice", None, user("m-1", "x"), vec![])
        .unwrap()
        .task_id
        .unwrap();
    plane.complete(&task, vec![], Some(agent("done"))).unwrap();
    clock.advance(31 * DAY_MS);
    // On demand (SIGHUP) it runs whatever the hour says.
    plane.compact().unwrap();
    assert!(plane
        .get_task("alice", &task, None, false)
        .unwrap()
        .is_none());
    clock.advance(RETENTION_EVERY_MS / 2);
    assert_eq!(plane.compact_if_due().unwrap(), None);
}
