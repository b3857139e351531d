//! The local API's garbage collection over raw HTTPS, as kube-controller-manager's garbage
//! collector does it (cascading deletes through the real binary and kubectl:
//! local_workloads.rs).

mod api_support;

use api_support::http::Http;
use api_support::start;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

/// ConfigMap `name` with one ownerReference per object of `owners` (as the server returned it:
/// its name and uid), each with the fields of `flags` (`controller`, `blockOwnerDeletion`).
fn owned_by(name: &str, owners: &[&Value], flags: &Value) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|o| {
            let mut r = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]});
            for (k, v) in flags.as_object().into_iter().flatten() {
                r[k] = v.clone();
            }
            r
        })
        .collect();
    let mut d = cm(name);
    d["metadata"]["ownerReferences"] = json!(refs);
    d
}

/// The garbage collector's `attemptToDeleteItem`: a dependent created while its only owner
/// waits in the foreground (a ReplicaSet controller replacing a terminating Pod from a cache
/// that has not seen its ReplicaSet's deletion) is deleted at once, so the owner still goes
/// when its other dependents do; one that also names a solid owner stays.
#[tokio::test]
async fn a_dependent_created_under_a_foreground_deletion_is_collected() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let (code, owner) = http.post(CMS, cm("owner")).await;
    assert_eq!(code, 201, "{owner}");
    let (_, solid) = http.post(CMS, cm("solid")).await;
    let blocking = json!({"controller": false, "blockOwnerDeletion": true});
    let dependent = |name: &str, finalizer: bool, owners: Vec<&Value>| {
        let mut d = owned_by(name, &owners, &blocking);
        if finalizer {
            d["metadata"]["finalizers"] = json!(["example.com/hold"]);
        }
        d
    };
    // A blocking dependent held by its own finalizer keeps the owner waiting.
    assert_eq!(
        http.post(CMS, dependent("held", true, vec![&owner]))
            .await
            .0,
        201
    );
    let foreground = json!({"kind": "DeleteOptions", "apiVersion": "v1",
        "propagationPolicy": "Foreground"});
    let (code, waiting) = http.delete(&format!("{CMS}/owner"), Some(foreground)).await;
    assert_eq!(code, 200, "{waiting}");
    assert_eq!(
        waiting["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );

    let (code, late) = http.post(CMS, dependent("late", false, vec![&owner])).await;
    assert_eq!(code, 201, "{late}");
    assert_eq!(
        http.get(&format!("{CMS}/late")).await.0,
        404,
        "a dependent of a waiting owner only is collected at once"
    );
    let (code, _) = http
        .post(CMS, dependent("shared", false, vec![&owner, &solid]))
        .await;
    assert_eq!(code, 201);
    let (code, shared) = http.get(&format!("{CMS}/shared")).await;
    assert_eq!(code, 200, "a dependent with a solid owner stays");
    assert_eq!(
        shared["metadata"]["ownerReferences"][0]["name"], "solid",
        "and loses its reference to the waiting owner: {shared}"
    );
    assert_eq!(
        shared["metadata"]["ownerReferences"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    let (code, _) = http
        .patch(
            &format!("{CMS}/held"),
            json!({"metadata": {"finalizers": null}}),
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(http.get(&format!("{CMS}/held")).await.0, 404);
    assert_eq!(
        http.get(&format!("{CMS}/owner")).await.0,
        404,
        "the owner goes with its last blocking dependent"
    );
}

/// Background deletion (the default): the owner goes at once and each dependent is attempted;
/// one with only that owner goes, one with a second, solid owner stays and loses only the
/// reference to the removed owner (`attemptToDeleteItem`'s solid-owner case).
#[tokio::test]
async fn a_background_deletion_keeps_a_dependent_with_another_solid_owner() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let (_, owner) = http.post(CMS, cm("owner")).await;
    let (_, solid) = http.post(CMS, cm("solid")).await;
    let plain = json!({});
    assert_eq!(
        http.post(CMS, owned_by("only", &[&owner], &plain)).await.0,
        201
    );
    assert_eq!(
        http.post(CMS, owned_by("shared", &[&owner, &solid], &plain))
            .await
            .0,
        201
    );
    let (code, _) = http.delete(&format!("{CMS}/owner"), None).await;
    assert_eq!(code, 200);
    assert_eq!(http.get(&format!("{CMS}/owner")).await.0, 404);
    assert_eq!(
        http.get(&format!("{CMS}/only")).await.0,
        404,
        "a dependent of the removed owner only goes with it"
    );
    let (code, shared) = http.get(&format!("{CMS}/shared")).await;
    assert_eq!(code, 200, "a dependent with a solid owner stays");
    assert_eq!(
        shared["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "solid",
            "uid": solid["metadata"]["uid"]}]),
        "and names only its solid owner"
    );
}

/// The collector finds an owner by the reference's name and takes a uid other than the
/// reference's as the owner gone (`isDangling`): a controller reference that blocks owner
/// deletion and carries a live object's uid under another name is dangling, and its dependent
/// is collected when created; the same reference with the owner's own name keeps it.
#[tokio::test]
async fn an_owner_is_found_by_the_references_name_and_uid() {
    let server = start(&["--no-local-controllers"]);
    let http = Http::new(&server);
    let (_, owner) = http.post(CMS, cm("owner")).await;
    let controller = json!({"controller": true, "blockOwnerDeletion": true});
    // The owner's uid under a name no object has.
    let renamed = json!({"metadata": {"name": "renamed", "uid": owner["metadata"]["uid"]}});
    assert_eq!(
        http.post(CMS, owned_by("kept", &[&owner], &controller))
            .await
            .0,
        201
    );
    assert_eq!(
        http.get(&format!("{CMS}/kept")).await.0,
        200,
        "a dependent of its owner by name and uid stays"
    );
    assert_eq!(
        http.post(CMS, owned_by("dangling", &[&renamed], &controller))
            .await
            .0,
        201
    );
    assert_eq!(
        http.get(&format!("{CMS}/dangling")).await.0,
        404,
        "a reference naming no object with its uid is dangling: the dependent is collected"
    );
}
