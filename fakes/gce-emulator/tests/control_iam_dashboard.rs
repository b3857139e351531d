//! IAM beyond the Compute API, over HTTP against the real binary (`--iam`; issue 43):
//! - the Network Services API (`/networkservices/v1/`) checks each method's permission
//!   (`networkservices.tlsRoutes.create` ...) and refuses in its own `google.rpc.Status` shape;
//!   `roles/networkservices.viewer` and `.admin` grant them, no Compute role does;
//! - the dashboard's "who may do what" page (`/_emulator/dashboard/iam`) lists each binding,
//!   a principal's expanded permissions and the recent refusals, and follows grants and
//!   revokes;
//! - `POST /_emulator/iam/tokens:revokeAll` makes every issued token's next use a 401.

mod control_support;

use control_support::Emulator;
use reqwest::Method;
use serde_json::{json, Value};

const SA: &str = "ns@p1.iam.gserviceaccount.com";

/// An access token for `email` from the admin API.
async fn token(emu: &Emulator, email: &str) -> String {
    let (code, v) = emu
        .admin(
            Method::POST,
            &format!("iam/serviceAccounts/{email}/tokens"),
            &Value::Null,
        )
        .await;
    assert_eq!(code, 200, "{v}");
    v["access_token"].as_str().unwrap().to_string()
}

async fn bind(emu: &Emulator, method: Method, member: &str, role: &str) {
    let (code, body) = emu
        .admin(
            method,
            "iam/projects/p1/bindings",
            &json!({"member": member, "role": role}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
}

/// `method /networkservices/v1/{path}` with `token` -> (status, JSON).
async fn ns(emu: &Emulator, token: &str, method: Method, path: &str, body: &str) -> (u16, Value) {
    let r = emu
        .http
        .request(method, format!("{}networkservices/v1/{path}", emu.root))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

const ROUTES: &str = "projects/p1/locations/global/tlsRoutes";

#[tokio::test]
async fn network_services_methods_need_their_permissions() {
    let emu = Emulator::start(&["--iam"]);
    let t = token(&emu, SA).await;
    let member = format!("serviceAccount:{SA}");
    // Compute's widest role holds no networkservices.* permission.
    bind(&emu, Method::POST, &member, "roles/compute.admin").await;

    let (code, body) = ns(
        &emu,
        &t,
        Method::POST,
        &format!("{ROUTES}?tlsRouteId=r1"),
        "{}",
    )
    .await;
    assert_eq!(code, 403, "{body}");
    let e = &body["error"];
    assert_eq!(e["status"], "PERMISSION_DENIED");
    assert_eq!(
        e["message"],
        "Permission 'networkservices.tlsRoutes.create' denied on resource \
         '//networkservices.googleapis.com/projects/p1/locations/global/tlsRoutes/r1' (or it may not exist)."
    );
    assert_eq!(
        e["details"][0],
        json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
            "domain": "iam.googleapis.com", "metadata": {"permission": "networkservices.tlsRoutes.create",
            "resource": "projects/p1/locations/global/tlsRoutes/r1"}})
    );
    assert!(
        e.get("errors").is_none(),
        "no Compute-style errors[]: {body}"
    );
    let (code, body) = ns(&emu, &t, Method::GET, ROUTES, "").await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["error"]["details"][0]["metadata"],
        json!({"permission": "networkservices.tlsRoutes.list", "resource": "projects/p1/locations/global"})
    );
    for (method, path, permission) in [
        (
            Method::GET,
            format!("{ROUTES}/r1"),
            "networkservices.tlsRoutes.get",
        ),
        (
            Method::PATCH,
            format!("{ROUTES}/r1"),
            "networkservices.tlsRoutes.update",
        ),
        (
            Method::DELETE,
            format!("{ROUTES}/r1"),
            "networkservices.tlsRoutes.delete",
        ),
        (
            Method::GET,
            "projects/p1/locations/global/operations/op-1".to_string(),
            "networkservices.operations.get",
        ),
    ] {
        let (code, body) = ns(&emu, &t, method.clone(), &path, "{}").await;
        assert_eq!(code, 403, "{method} {path}: {body}");
        assert_eq!(
            body["error"]["details"][0]["metadata"]["permission"],
            permission
        );
    }

    // The viewer reads, and may not write.
    bind(&emu, Method::POST, &member, "roles/networkservices.viewer").await;
    let (code, body) = ns(&emu, &t, Method::GET, ROUTES, "").await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = ns(&emu, &t, Method::GET, &format!("{ROUTES}/r1"), "").await;
    assert_eq!(code, 404, "allowed, and the route does not exist: {body}");
    let (code, _) = ns(
        &emu,
        &t,
        Method::POST,
        &format!("{ROUTES}?tlsRouteId=r1"),
        "{}",
    )
    .await;
    assert_eq!(code, 403);
    // The admin writes: the create passes IAM and reaches validation (no rules: 400).
    bind(&emu, Method::POST, &member, "roles/networkservices.admin").await;
    let (code, body) = ns(
        &emu,
        &t,
        Method::POST,
        &format!("{ROUTES}?tlsRouteId=r1"),
        "{}",
    )
    .await;
    assert_eq!(code, 400, "{body}");
    // The checks were counted like Compute's.
    let usage = emu.admin_get("iam").await["usage"][&member].clone();
    assert_eq!(
        usage["networkservices.tlsRoutes.create"]["denied"], 2,
        "{usage}"
    );
    assert_eq!(
        usage["networkservices.tlsRoutes.create"]["granted"], 1,
        "{usage}"
    );
}

async fn dashboard(emu: &Emulator, principal: &str) -> String {
    let r = emu
        .http
        .get(format!("{}_emulator/dashboard/iam", emu.root))
        .query(&[("principal", principal)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

#[tokio::test]
async fn the_dashboard_shows_who_may_do_what_and_follows_revokes() {
    let emu = Emulator::start(&["--iam"]);
    let member = format!("serviceAccount:{SA}");
    let yaml = "title: lister\nincludedPermissions:\n- compute.urlMaps.list\n";
    let r = emu
        .http
        .put(format!(
            "{}_emulator/iam/projects/p1/roles/lister",
            emu.root
        ))
        .body(yaml)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    bind(&emu, Method::POST, &member, "projects/p1/roles/lister").await;
    bind(&emu, Method::POST, &member, "roles/networkservices.viewer").await;
    let t = token(&emu, SA).await;
    // One refusal to show: creating a health check needs compute.healthChecks.create.
    let r = emu
        .http
        .post(format!("{}projects/p1/global/healthChecks", emu.base))
        .bearer_auth(&t)
        .json(&json!({"name": "hc", "type": "TCP", "tcpHealthCheck": {"port": 80}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let page = dashboard(&emu, &member).await;
    // The binding, as the admin API lists it.
    let listed = emu.admin_get("iam/projects/p1/bindings").await;
    assert_eq!(listed["bindings"].as_array().unwrap().len(), 2, "{listed}");
    for part in [
        "<h3 id=\"project-p1\">p1</h3>",
        "<tr data-role=\"projects/p1/roles/lister\">",
        "<tr data-role=\"roles/networkservices.viewer\">",
        "serviceAccount:ns@p1.iam.gserviceaccount.com</a>",
        // Expanded permissions: the custom role's and the predefined role's pattern.
        "<li class=permission><code>compute.urlMaps.list</code></li>",
        "<li class=permission><code>networkservices.tlsRoutes.get</code></li>",
        // The refusal: method, permission, resource, principal.
        "<td><code>compute.healthChecks.insert</code></td><td><code>compute.healthChecks.create</code></td>\
<td><code>projects/p1/global/healthChecks/hc</code></td><td>serviceAccount:ns@p1.iam.gserviceaccount.com</td>",
    ] {
        assert!(page.contains(part), "{part:?} missing from\n{page}");
    }
    assert!(
        !page.contains("<code>compute.urlMaps.create</code>"),
        "{page}"
    );

    // Revoked: the binding and its permissions are gone from the page.
    bind(&emu, Method::DELETE, &member, "projects/p1/roles/lister").await;
    let page = dashboard(&emu, &member).await;
    assert!(
        !page.contains("data-role=\"projects/p1/roles/lister\""),
        "{page}"
    );
    assert!(
        !page.contains("<code>compute.urlMaps.list</code>"),
        "{page}"
    );
    assert!(
        page.contains("<code>networkservices.tlsRoutes.get</code>"),
        "{page}"
    );
    // The load balancer page links here.
    let main = emu
        .http
        .get(format!("{}_emulator/dashboard", emu.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(main.contains("href=\"/_emulator/dashboard/iam\""));
}

#[tokio::test]
async fn revoking_every_token_makes_the_next_call_401() {
    let emu = Emulator::start(&["--iam"]);
    bind(
        &emu,
        Method::POST,
        &format!("serviceAccount:{SA}"),
        "roles/compute.viewer",
    )
    .await;
    let t = token(&emu, SA).await;
    let list = async |t: &str| {
        emu.http
            .get(format!("{}projects/p1/global/urlMaps", emu.base))
            .bearer_auth(t)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(list(&t).await, 200);
    let (code, v) = emu
        .admin(Method::POST, "iam/tokens:revokeAll", &Value::Null)
        .await;
    assert_eq!((code, v["revoked"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(list(&t).await, 401);
    let summary = emu.admin_get("iam").await;
    assert_eq!(summary["unauthenticated"], 1, "{summary}");
    assert_eq!(summary["refusals"][0]["code"], 401, "{summary}");
    // A new token works.
    let t2 = token(&emu, SA).await;
    assert_eq!(list(&t2).await, 200);
}
