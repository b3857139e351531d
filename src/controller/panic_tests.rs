//! A panicking reconcile is caught, counted and reported as an error naming the Ingress.

use super::*;
use kube::runtime::controller::Action;

#[tokio::test]
async fn a_panicking_reconcile_is_an_error_naming_the_ingress_and_counted() {
    let metrics = ControllerMetrics::default();
    let key = "shop/web";
    let panicking = async {
        let v: Vec<u8> = Vec::new();
        // An index out of bounds, as a bug would.
        let _ = v[usize::from(v.is_empty())];
        Ok(Action::await_change())
    };
    let got = catch_panic(key, &metrics, panicking).await;
    match got {
        Err(Error::Panicked { ingress, message }) => {
            assert_eq!(ingress, key);
            assert!(message.contains("index out of bounds"), "{message}");
        }
        other => panic!("expected Error::Panicked, got {other:?}"),
    }
    let panics = |m: &ControllerMetrics| {
        m.sync_errors
            .get_or_create(&metrics::ResultLabels {
                result: "panic".into(),
            })
            .get()
    };
    assert_eq!(panics(&metrics), 1);
    // A reconcile that does not panic passes through untouched.
    let fine = catch_panic(key, &metrics, async { Ok(Action::await_change()) }).await;
    assert!(fine.is_ok());
    assert_eq!(panics(&metrics), 1);
}
