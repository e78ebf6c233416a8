//! Outbound delivery: one provider mutation per delivery, conflicts refused, recovery after
//! a crash mid-send follows the declared policy, and ambiguous is final. Leases: only the
//! holder finishes, a waiter shares the holder's outcome, and an expired lease is taken over
//! through recovery.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::Poll;
use std::time::Instant;

use a2a_task_plane::plane::{
    content_address, DeliveryLease, DeliveryOutcome, DeliveryRequest, DeliveryStart, PlaneError,
    Reconciler, Recovery, SendFailure, TaskPlane,
};
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
    execute_in(
        plane,
        &format!(
            "INSERT INTO deliveries (delivery_id, principal, source, task_id, operation_id, payload_digest, recovery, state, created_ms, updated_ms) \
             VALUES ('{}', 'alice', 'mail', NULL, '{}', '{}', '{}', 'sending', 0, 0)",
            r.delivery_id, r.operation_id, r.payload_digest, r.recovery.as_str()
        ),
    );
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
    assert_eq!(
        count_in(
            &plane,
            "SELECT COUNT(*) FROM evidence WHERE kind = 'delivery_ambiguous' AND NOT healthy"
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

/// The lease of a step that has one.
fn lease_of(step: &DeliveryStart) -> &DeliveryLease {
    match step {
        DeliveryStart::Send(lease) | DeliveryStart::Lookup(lease) => lease,
        DeliveryStart::Finished(outcome) => {
            panic!("expected a lease, the delivery finished: {outcome:?}")
        }
    }
}

fn refused(err: PlaneError) -> String {
    assert!(matches!(err, PlaneError::FailedPrecondition(_)), "{err:?}");
    assert_eq!(err.reason(), "FAILED_PRECONDITION");
    err.to_string()
}

/// `future` polled once (it registers its wake-ups on `rt`).
fn poll_once<F: Future>(rt: &tokio::runtime::Runtime, mut future: Pin<&mut F>) -> Poll<F::Output> {
    rt.block_on(std::future::poll_fn(|cx| {
        Poll::Ready(future.as_mut().poll(cx))
    }))
}

/// Whether `future` is still waiting after one poll.
fn pending<F: Future>(rt: &tokio::runtime::Runtime, future: Pin<&mut F>) -> bool {
    poll_once(rt, future).is_pending()
}

#[test]
fn a_delivery_lease_is_honoured_only_for_its_holder() {
    let tmp = TempRoot::new("dl-lease-holder");
    let plane = open(&tmp.store());
    let req = request("d-1", "answer", Recovery::IdempotencyKey);
    let step = plane.begin_delivery(&req, false, None).unwrap();
    assert!(matches!(step, DeliveryStart::Send(_)), "{step:?}");
    let lease = lease_of(&step).clone();
    assert_eq!(lease.token.len(), 32);
    assert!(lease.token.bytes().all(|b| b.is_ascii_hexdigit()));

    // Someone else's lease, or a made-up one, finishes nothing.
    let other = plane
        .begin_delivery(
            &request("d-2", "other", Recovery::IdempotencyKey),
            false,
            None,
        )
        .unwrap();
    assert_ne!(lease_of(&other).token, lease.token);
    for wrong in [
        lease_of(&other).token.as_str(),
        "0123456789abcdef0123456789abcdef",
    ] {
        let message = refused(
            plane
                .finish_delivery(&req, wrong, Ok("resp-x".into()))
                .unwrap_err(),
        );
        assert!(
            message.contains("delivery d-1 was not begun with this lease"),
            "{message}"
        );
        assert!(message.contains("call beginDelivery"), "{message}");
        refused(plane.resolve_lookup(&req, wrong, Ok(None)).unwrap_err());
    }
    assert_eq!(
        plane.delivery_state("d-1").unwrap(),
        Some(("sending".into(), 1)),
        "a refused call records nothing"
    );

    // The holder's lease works, once: finishing ends it.
    let outcome = plane
        .finish_delivery(&req, &lease.token, Ok("resp-1".into()))
        .unwrap();
    assert_eq!(
        outcome,
        DeliveryOutcome::Delivered {
            provider_response_id: "resp-1".into(),
            sent_now: true
        }
    );
    refused(
        plane
            .finish_delivery(&req, &lease.token, Ok("resp-2".into()))
            .unwrap_err(),
    );

    // A lease's length is bounded, and the error names the parameter and the range.
    for bad in [0, 99, 600_001] {
        let err = plane.begin_delivery(&req, false, Some(bad)).unwrap_err();
        assert_eq!(err.reason(), "INVALID_ARGUMENT");
        assert_eq!(
            err.to_string(),
            format!("invalid `leaseMs`: must be 100..=600000 milliseconds (100 ms to 10 min), got {bad}")
        );
    }
}

#[test]
fn a_waiter_shares_the_holders_outcome() {
    let tmp = TempRoot::new("dl-lease-waiter");
    let plane = open(&tmp.store());
    let rt = runtime();
    for (id, result) in [
        ("d-1", Ok("resp-1".to_string())),
        ("d-2", Err(SendFailure::Unknown("timeout".into()))),
    ] {
        let req = request(id, "answer", Recovery::Lookup);
        let holder = plane.begin_delivery(&req, false, None).unwrap();
        // An async waiter waits (holding no thread) while the holder's lease is live...
        let mut waiter = Box::pin(plane.delivery_turn(&req, None));
        assert!(
            pending(&rt, waiter.as_mut()),
            "a live lease makes {id} wait"
        );
        // ...and so does a blocking one.
        let sends = Arc::new(AtomicUsize::new(0));
        let blocked = {
            let (plane, req, sends) = (plane.clone(), req.clone(), sends.clone());
            std::thread::spawn(move || {
                plane.deliver(req, None, || {
                    sends.fetch_add(1, Ordering::SeqCst);
                    Ok("resp-again".into())
                })
            })
        };
        let finished = plane
            .finish_delivery(&req, &lease_of(&holder).token, result)
            .unwrap();
        let turn = rt.block_on(waiter).unwrap();
        let shared = plane.begin_delivery_turn(turn, &req, false).unwrap();
        let expected = match finished {
            DeliveryOutcome::Delivered {
                provider_response_id,
                ..
            } => DeliveryOutcome::Delivered {
                provider_response_id,
                sent_now: false,
            },
            other => other,
        };
        assert_eq!(shared, DeliveryStart::Finished(expected.clone()));
        assert_eq!(blocked.join().unwrap().unwrap(), expected);
        assert_eq!(
            sends.load(Ordering::SeqCst),
            0,
            "one provider mutation: the holder's"
        );
    }
    assert_eq!(
        plane.delivery_state("d-1").unwrap(),
        Some(("delivered".into(), 1))
    );
    assert_eq!(
        plane.delivery_state("d-2").unwrap(),
        Some(("ambiguous".into(), 1))
    );
}

#[test]
fn an_expired_lease_is_taken_over_through_recovery() {
    let tmp = TempRoot::new("dl-lease-takeover");
    let plane = open(&tmp.store());
    struct Found;
    impl Reconciler for Found {
        fn lookup(&self, _: &DeliveryRequest) -> Result<Option<String>, String> {
            Ok(Some("resp-found".into()))
        }
    }
    // (delivery, recovery, the taker has a reconciler, what the taker is told to do)
    let cases = [
        ("d-key", Recovery::IdempotencyKey, false, "send"),
        ("d-lookup", Recovery::Lookup, true, "lookup"),
        ("d-blind", Recovery::Lookup, false, "ambiguous"),
        ("d-amb", Recovery::Ambiguous, false, "ambiguous"),
    ];
    // Each holder begins with a short lease and never finishes (it crashed, or hangs).
    let holders: Vec<_> = cases
        .iter()
        .map(|(id, recovery, _, _)| {
            let req = request(id, "answer", *recovery);
            let step = plane.begin_delivery(&req, false, Some(200)).unwrap();
            (req, lease_of(&step).clone())
        })
        .collect();
    for ((req, old), (id, _, can_look_up, expected)) in holders.iter().zip(cases) {
        // Waits for the holder's lease to expire, then recovers as after a crash.
        let taken = plane.begin_delivery(req, can_look_up, None).unwrap();
        assert!(
            Instant::now() >= old.expires_at,
            "{id} was taken over before its lease expired"
        );
        match (expected, &taken) {
            ("send", DeliveryStart::Send(lease)) | ("lookup", DeliveryStart::Lookup(lease)) => {
                assert_ne!(lease.token, old.token)
            }
            ("ambiguous", DeliveryStart::Finished(DeliveryOutcome::Ambiguous { detail })) => {
                assert!(detail.contains("its lease expired"), "{detail}")
            }
            _ => panic!("{id}: expected {expected}, got {taken:?}"),
        }
        // The old holder's late finish is refused, and says why.
        let message = refused(
            plane
                .finish_delivery(req, &old.token, Ok("resp-late".into()))
                .unwrap_err(),
        );
        assert!(
            message.contains(&format!(
                "delivery {id}: this lease expired after 200 ms and was taken over"
            )),
            "{message}"
        );
        // The new holder carries on.
        match taken {
            DeliveryStart::Send(lease) => {
                let outcome = plane
                    .finish_delivery(req, &lease.token, Ok("resp-resent".into()))
                    .unwrap();
                assert!(matches!(
                    outcome,
                    DeliveryOutcome::Delivered { sent_now: true, .. }
                ));
            }
            DeliveryStart::Lookup(lease) => {
                let found = Found.lookup(req);
                let step = plane.resolve_lookup(req, &lease.token, found).unwrap();
                assert_eq!(
                    step,
                    DeliveryStart::Finished(DeliveryOutcome::Delivered {
                        provider_response_id: "resp-found".into(),
                        sent_now: false
                    })
                );
            }
            DeliveryStart::Finished(_) => {}
        }
    }
    let state = |id| plane.delivery_state(id).unwrap().unwrap().0;
    assert_eq!(state("d-key"), "delivered");
    assert_eq!(state("d-lookup"), "delivered");
    assert_eq!(state("d-blind"), "ambiguous");
    assert_eq!(state("d-amb"), "ambiguous");
}

#[test]
fn an_expired_lease_not_taken_over_is_still_honoured() {
    let tmp = TempRoot::new("dl-lease-honoured");
    let plane = open(&tmp.store());
    let wait_out = |lease: &DeliveryLease| {
        std::thread::sleep(lease.expires_at.saturating_duration_since(Instant::now()))
    };

    // A send whose lease ran out while nobody else came.
    let req = request("d-1", "answer", Recovery::IdempotencyKey);
    let step = plane.begin_delivery(&req, false, Some(200)).unwrap();
    let lease = lease_of(&step).clone();
    wait_out(&lease);
    let outcome = plane
        .finish_delivery(&req, &lease.token, Ok("resp-1".into()))
        .unwrap();
    assert!(matches!(
        outcome,
        DeliveryOutcome::Delivered { sent_now: true, .. }
    ));

    // A lookup that ran out: "not found" keeps the same lease, renewed, for the send.
    let req = request("d-2", "payload", Recovery::Lookup);
    stranded_in_sending(&plane, "d-2", Recovery::Lookup);
    let step = plane.begin_delivery(&req, true, Some(200)).unwrap();
    assert!(matches!(step, DeliveryStart::Lookup(_)), "{step:?}");
    let lease = lease_of(&step).clone();
    wait_out(&lease);
    let send = plane.resolve_lookup(&req, &lease.token, Ok(None)).unwrap();
    let DeliveryStart::Send(renewed) = send else {
        panic!("not found must send: {send:?}")
    };
    assert_eq!(renewed.token, lease.token);
    assert!(renewed.expires_at > lease.expires_at);
    let outcome = plane
        .finish_delivery(&req, &renewed.token, Ok("resp-2".into()))
        .unwrap();
    assert!(matches!(
        outcome,
        DeliveryOutcome::Delivered { sent_now: true, .. }
    ));
}

#[test]
fn a_send_that_panics_ends_its_lease() {
    let tmp = TempRoot::new("dl-lease-panic");
    let plane = open(&tmp.store());
    let req = request("d-1", "answer", Recovery::IdempotencyKey);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        plane.deliver(req.clone(), None, || panic!("the provider client crashed"))
    }));
    assert!(panicked.is_err());
    // Nobody waits for the panicked lease: the next caller's turn is ready at once, and
    // the stored `sending` state drives its recovery (the idempotency key: send again).
    let rt = runtime();
    let Poll::Ready(turn) = poll_once(&rt, std::pin::pin!(plane.delivery_turn(&req, None))) else {
        panic!("the panicked send's lease still holds the delivery")
    };
    let turn = turn.unwrap();
    let step = plane.begin_delivery_turn(turn, &req, false).unwrap();
    assert!(matches!(step, DeliveryStart::Send(_)), "{step:?}");
}

#[test]
fn closing_the_plane_ends_the_wait_for_a_lease() {
    let tmp = TempRoot::new("dl-lease-close");
    let plane = open(&tmp.store());
    let req = request("d-1", "answer", Recovery::IdempotencyKey);
    let _holder = plane.begin_delivery(&req, false, None).unwrap();
    let rt = runtime();
    let mut waiter = Box::pin(plane.delivery_turn(&req, None));
    assert!(pending(&rt, waiter.as_mut()));
    plane.close();
    let Err(err) = rt.block_on(waiter) else {
        panic!("a closed plane grants no turn")
    };
    assert!(err.is_closed(), "{err}");
}
