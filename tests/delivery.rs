//! Outbound delivery: one provider mutation per delivery, conflicts refused, recovery after
//! a crash mid-send follows the declared policy, and ambiguous is final.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use a2a_task_plane::plane::{
    content_address, DeliveryOutcome, DeliveryRequest, PlaneError, Reconciler, Recovery,
    SendFailure, TaskPlane,
};
use a2a_task_plane::store::StoreError;
use common::*;

fn request(id: &str, payload: &str, recovery: Recovery) -> DeliveryRequest {
    DeliveryRequest {
        delivery_id: id.into(),
        principal: "alice".into(),
        source: "mail".into(),
        task_id: None,
        operation_id: format!("op-{id}"),
        payload_digest: content_address(payload.as_bytes()),
        recovery,
    }
}

/// Leaves `id` in `sending`, as a process that died during the provider call would.
fn stranded_in_sending(plane: &TaskPlane, id: &str, recovery: Recovery) {
    let r = request(id, "payload", recovery);
    plane
        .store()
        .write(move |tx| {
            tx.conn().execute(
                "INSERT INTO deliveries (delivery_id, principal, source, task_id, operation_id, payload_digest, recovery, state, created_ms, updated_ms) \
                 VALUES (?1, 'alice', 'mail', NULL, ?2, ?3, ?4, 'sending', 0, 0)",
                rusqlite::params![r.delivery_id, r.operation_id, r.payload_digest, r.recovery.as_str()],
            )?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn concurrent_identical_responses_share_one_transition_and_one_provider_mutation() {
    let tmp = TempRoot::new("dl-concurrent");
    let plane = open(&tmp.store());
    let sends = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (plane, sends, barrier) = (plane.clone(), sends.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                plane
                    .deliver(request("d-1", "answer", Recovery::Lookup), None, || {
                        sends.fetch_add(1, Ordering::SeqCst);
                        // The provider call's latency, not a synchronisation: the others
                        // arrive while it is in flight, and the outcome must not depend on
                        // whether they do.
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        Ok("resp-1".into())
                    })
                    .unwrap()
            })
        })
        .collect();
    let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(sends.load(Ordering::SeqCst), 1, "one provider mutation");
    let fresh = outcomes
        .iter()
        .filter(|o| matches!(o, DeliveryOutcome::Delivered { sent_now: true, .. }))
        .count();
    assert_eq!(fresh, 1);
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, DeliveryOutcome::Delivered { provider_response_id, .. } if provider_response_id == "resp-1")));
    assert_eq!(
        plane.delivery_state("d-1").unwrap(),
        Some(("delivered".into(), 1))
    );
}

#[test]
fn a_reused_operation_id_with_a_different_payload_is_rejected() {
    let tmp = TempRoot::new("dl-conflict");
    let plane = open(&tmp.store());
    plane
        .deliver(
            request("d-1", "answer", Recovery::IdempotencyKey),
            None,
            || Ok("r".into()),
        )
        .unwrap();
    let err = plane
        .deliver(
            request("d-1", "another answer", Recovery::IdempotencyKey),
            None,
            || panic!("must not send"),
        )
        .unwrap_err();
    assert!(matches!(err, PlaneError::DeliveryConflict(_)), "{err}");
    let mut other = request("d-2", "another answer", Recovery::IdempotencyKey);
    other.operation_id = "op-d-1".into();
    let err = plane
        .deliver(other, None, || panic!("must not send"))
        .unwrap_err();
    assert!(err.to_string().contains("op-d-1"), "{err}");
}

#[test]
fn a_lookup_delivery_without_its_reconciler_fails_closed_as_ambiguous() {
    let tmp = TempRoot::new("dl-lookup");
    let plane = open(&tmp.store());
    stranded_in_sending(&plane, "d-1", Recovery::Lookup);
    let outcome = plane
        .deliver(request("d-1", "payload", Recovery::Lookup), None, || {
            panic!("must not send blindly")
        })
        .unwrap();
    assert!(
        matches!(outcome, DeliveryOutcome::Ambiguous { .. }),
        "{outcome:?}"
    );
    let db = plane.store().db_path().to_path_buf();
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM evidence WHERE kind = 'delivery_ambiguous' AND healthy = 0"
        ),
        1
    );
    // Ambiguous is never retried automatically, even once a reconciler is at hand.
    struct Found;
    impl Reconciler for Found {
        fn lookup(&self, _: &DeliveryRequest) -> Result<Option<String>, String> {
            Ok(Some("resp-9".into()))
        }
    }
    let again = plane
        .deliver(
            request("d-1", "payload", Recovery::Lookup),
            Some(&Found),
            || panic!("must not send"),
        )
        .unwrap();
    assert!(matches!(again, DeliveryOutcome::Ambiguous { .. }));
}

#[test]
fn a_lookup_delivery_with_its_reconciler_recovers_without_a_second_mutation() {
    let tmp = TempRoot::new("dl-reconcile");
    let plane = open(&tmp.store());
    struct Found;
    impl Reconciler for Found {
        fn lookup(&self, _: &DeliveryRequest) -> Result<Option<String>, String> {
            Ok(Some("resp-7".into()))
        }
    }
    stranded_in_sending(&plane, "d-1", Recovery::Lookup);
    let outcome = plane
        .deliver(
            request("d-1", "payload", Recovery::Lookup),
            Some(&Found),
            || panic!("it was sent already"),
        )
        .unwrap();
    assert_eq!(
        outcome,
        DeliveryOutcome::Delivered {
            provider_response_id: "resp-7".into(),
            sent_now: false
        }
    );
    // Not found by the reconciler: it was never sent, so it is sent now.
    struct Missing;
    impl Reconciler for Missing {
        fn lookup(&self, _: &DeliveryRequest) -> Result<Option<String>, String> {
            Ok(None)
        }
    }
    stranded_in_sending(&plane, "d-2", Recovery::Lookup);
    let outcome = plane
        .deliver(
            request("d-2", "payload", Recovery::Lookup),
            Some(&Missing),
            || Ok("resp-8".into()),
        )
        .unwrap();
    assert_eq!(
        outcome,
        DeliveryOutcome::Delivered {
            provider_response_id: "resp-8".into(),
            sent_now: true
        }
    );
}

#[test]
fn an_idempotency_key_makes_resending_after_a_crash_safe_and_the_ambiguous_policy_does_not_resend()
{
    let tmp = TempRoot::new("dl-recovery");
    let plane = open(&tmp.store());
    stranded_in_sending(&plane, "d-1", Recovery::IdempotencyKey);
    let resent = plane
        .deliver(
            request("d-1", "payload", Recovery::IdempotencyKey),
            None,
            || Ok("r-1".into()),
        )
        .unwrap();
    assert!(matches!(
        resent,
        DeliveryOutcome::Delivered { sent_now: true, .. }
    ));
    stranded_in_sending(&plane, "d-2", Recovery::Ambiguous);
    let outcome = plane
        .deliver(request("d-2", "payload", Recovery::Ambiguous), None, || {
            panic!("no")
        })
        .unwrap();
    assert!(matches!(outcome, DeliveryOutcome::Ambiguous { .. }));
}

#[test]
fn a_send_that_may_have_happened_is_ambiguous_and_one_that_did_not_may_be_retried() {
    let tmp = TempRoot::new("dl-failures");
    let plane = open(&tmp.store());
    let unknown = plane
        .deliver(request("d-1", "p", Recovery::IdempotencyKey), None, || {
            Err(SendFailure::Unknown("timeout".into()))
        })
        .unwrap();
    assert_eq!(
        unknown,
        DeliveryOutcome::Ambiguous {
            detail: "timeout".into()
        }
    );
    let not_sent = plane
        .deliver(request("d-2", "p", Recovery::IdempotencyKey), None, || {
            Err(SendFailure::NotSent("429".into()))
        })
        .unwrap();
    assert_eq!(
        not_sent,
        DeliveryOutcome::NotSent {
            detail: "429".into()
        }
    );
    let retried = plane
        .deliver(request("d-2", "p", Recovery::IdempotencyKey), None, || {
            Ok("r".into())
        })
        .unwrap();
    assert!(matches!(
        retried,
        DeliveryOutcome::Delivered { sent_now: true, .. }
    ));
    assert_eq!(
        plane.delivery_state("d-2").unwrap(),
        Some(("delivered".into(), 2))
    );
}
