//! End to end: kubectl applies the GKE documentation's my-ingress fanout to the local Kubernetes
//! API; the operator builds the load balancer in the Compute emulator; real HTTP requests through
//! the emulated load balancer reach the right Pods (issue 5's acceptance list).

mod support;

use anyhow::{anyhow, Context, Result};
use support::*;

fn examples() -> std::path::PathBuf {
    repo_root().join("docs/examples")
}

/// Starts everything and waits until my-ingress serves; returns the system and the socket.
fn system_with_my_ingress() -> Result<(System, String)> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_path(&examples())?;
    sys.start_operator(&[])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    Ok((sys, socket))
}

#[test]
fn my_ingress_routes_requests_to_the_right_pods() -> Result<()> {
    let (sys, socket) = system_with_my_ingress()?;
    let host = "your-store.example";

    let products = sys.wait_for_response(&socket, host, "/products", 200, "\"pod\"")?;
    assert!(
        products.contains("products-"),
        "/products answered by {products}"
    );
    assert!(
        !products.contains("discounted-products-"),
        "/products answered by {products}"
    );

    let discounted = sys.wait_for_response(&socket, host, "/discounted", 200, "\"pod\"")?;
    assert!(
        discounted.contains("discounted-products-"),
        "/discounted answered by {discounted}"
    );

    // Unmatched path and unknown host: the default backend's 404, like GKE's.
    let (status, body) = sys.http_get(&socket, host, "/nothing-here")?;
    assert_eq!(status, 404, "unmatched path: {body}");
    assert!(
        body.contains("default backend - 404"),
        "unmatched path: {body}"
    );
    let (status, _) = sys.http_get(&socket, "unknown.example", "/products")?;
    assert_eq!(status, 404);

    // Both Pods of a Service serve traffic (NEG endpoints are the Pod IPs). Polled: the first
    // 200 only means one endpoint is HEALTHY; the other may still be on its way (attached
    // later, or its health check not yet passed).
    let mut seen = std::collections::BTreeSet::new();
    wait_for("both products Pods to answer", DEADLINE, || {
        let (_, body) = sys.http_get(&socket, host, "/products")?;
        if let Some(pod) = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["pod"].as_str().map(str::to_string))
        {
            seen.insert(pod);
        }
        if seen.len() > 2 {
            return Err(anyhow!(
                "more than the two products Pods answered: {seen:?}"
            ));
        }
        Ok((seen.len() == 2).then_some(()))
    })
    .with_context(|| format!("saw {seen:?}"))?;

    // The finalizer is on the Ingress and the status annotations name the resources (written
    // after the IP, so polled).
    let ing = wait_for("the url-map annotation", DEADLINE, || {
        let ing = sys.get_json(&["ingress", "my-ingress"])?;
        Ok(
            ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
                .is_string()
                .then_some(ing),
        )
    })
    .with_context(|| sys.logs())?;
    let finalizers = ing["metadata"]["finalizers"].to_string();
    assert!(
        finalizers.contains("networking.gke.io/ingress-finalizer-V2"),
        "finalizers: {finalizers}"
    );
    let url_map = ing["metadata"]["annotations"]["ingress.kubernetes.io/url-map"]
        .as_str()
        .unwrap_or_default();
    assert!(
        url_map.starts_with("k8s2-um-"),
        "url-map annotation: {url_map:?}"
    );
    assert!(sys.compute_names("urlMaps")?.contains(&url_map.to_string()));
    Ok(())
}

#[test]
fn edits_to_the_ingress_and_services_change_routing_and_deletion_cleans_up() -> Result<()> {
    let (sys, socket) = system_with_my_ingress()?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;

    // Add a path and a host.
    let more = r#"      - path: /discounted
        pathType: ImplementationSpecific
        backend: {service: {name: my-discounted-products, port: {number: 80}}}
      - path: /sale
        pathType: Prefix
        backend: {service: {name: my-discounted-products, port: {number: 80}}}
  - host: your-experimental-store.example
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: my-products, port: {number: 60000}}}
"#;
    sys.apply(&(fanout::ingress("my-ingress", None, false) + more))?;
    let sale = sys.wait_for_response(
        &socket,
        "your-store.example",
        "/sale/today",
        200,
        "discounted-products-",
    )?;
    assert!(
        sale.contains("/sale/today"),
        "the Pod saw the original path: {sale}"
    );
    sys.wait_for_response(
        &socket,
        "your-experimental-store.example",
        "/anything",
        200,
        "\"products-",
    )?;

    // Change the Service's targetPort: the products Pods also listen on 50001, and traffic moves
    // there (the echo answer names the port it was received on).
    sys.apply(
        r#"
apiVersion: v1
kind: Service
metadata:
  name: my-products
spec:
  type: NodePort
  selector: {app: products, department: sales}
  ports:
  - {protocol: TCP, port: 60000, targetPort: 50001}
"#,
    )?;
    wait_for("/products to reach port 50001", DEADLINE, || {
        let (status, body) = sys.http_get(&socket, "your-store.example", "/products")?;
        let port = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["port"].as_u64());
        Ok((status == 200 && port == Some(50001)).then_some(()))
    })
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;

    // Deleting the Ingress removes every cloud resource it created, the firewall rule included
    // (no Ingress is left), and the object itself goes once the finalizer is removed.
    sys.kubectl_ok(&["delete", "ingress", "my-ingress", "--wait=false"])?;
    wait_for(
        "every load balancer resource to be deleted",
        DEADLINE,
        || {
            let mut left = Vec::new();
            for c in [
                "forwardingRules",
                "targetHttpProxies",
                "targetHttpsProxies",
                "urlMaps",
                "backendServices",
                "healthChecks",
                "sslCertificates",
            ] {
                left.extend(
                    sys.compute_names(c)?
                        .into_iter()
                        .map(|n| format!("{c}/{n}")),
                );
            }
            left.extend(
                sys.created_firewalls()?
                    .into_iter()
                    .map(|n| format!("firewalls/{n}")),
            );
            left.extend(
                sys.neg_names()?
                    .into_iter()
                    .map(|n| format!("networkEndpointGroups/{n}")),
            );
            if left.is_empty() {
                Ok(Some(()))
            } else {
                Err(anyhow!("still present: {left:?}"))
            }
        },
    )
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
    wait_for("the Ingress object to go", DEADLINE, || {
        let out = sys.kubectl(&["get", "ingress", "my-ingress", "-o", "name"])?;
        Ok((!out.status.success()).then_some(()))
    })?;
    Ok(())
}

#[test]
fn a_broken_ingress_gets_warning_events_and_does_not_stop_a_valid_one() -> Result<()> {
    let (sys, socket) = system_with_my_ingress()?;
    sys.apply(
        r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bad-wildcard
spec:
  rules:
  - host: bad.example
    http:
      paths:
      - path: /foo/*/bar
        pathType: ImplementationSpecific
        backend: {service: {name: my-products, port: {number: 60000}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: missing-service
spec:
  rules:
  - http:
      paths:
      - path: /x
        pathType: Prefix
        backend: {service: {name: no-such-service, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: missing-port
spec:
  rules:
  - http:
      paths:
      - path: /y
        pathType: Prefix
        backend: {service: {name: my-products, port: {number: 12345}}}
"#,
    )?;
    for (name, needle) in [
        ("bad-wildcard", "/foo/*/bar"),
        ("missing-service", "no-such-service"),
        ("missing-port", "12345"),
    ] {
        let events = wait_for(&format!("a Warning event on {name}"), DEADLINE, || {
            let ev = sys.events_for("default", "Ingress", name)?;
            Ok(ev
                .iter()
                .any(|e| e.starts_with("Warning") && e.contains(needle))
                .then_some(ev))
        })
        .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
        let warning = events.iter().find(|e| e.starts_with("Warning")).unwrap();
        assert!(
            warning.contains("spec."),
            "the Warning names the field: {warning}"
        );
        // Nothing was built for it: no IP.
        let ing = sys.get_json(&["ingress", name])?;
        assert!(
            ing["status"]["loadBalancer"]["ingress"]
                .as_array()
                .is_none_or(|a| a.is_empty()),
            "{name} got an IP"
        );
    }
    // The valid Ingress keeps serving.
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;
    Ok(())
}

/// Dropping a Service from the Ingress garbage-collects its backend service, health check and
/// NEG (in the background, shortly after the sync that changed the URL map), while the rest of
/// the load balancer keeps serving (ingress-gce #1756: no 502 for the remaining paths). Requests
/// sent all through the change, each once (no retries), show it: `/products` always answers 200
/// and `/discounted` 200 until the URL map drops it, then the default backend's 404 for good.
#[test]
fn a_service_dropped_from_the_ingress_has_its_backend_collected() -> Result<()> {
    let (sys, socket) = system_with_my_ingress()?;
    let host = "your-store.example";
    sys.wait_for_response(&socket, host, "/products", 200, "\"products-")?;
    sys.wait_for_response(&socket, host, "/discounted", 200, "discounted-products-")?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<()> {
        let prober = scope.spawn(|| {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for path in ["/products", "/discounted"] {
                    let status = sys.http_get(&socket, host, path).map(|(s, _)| s);
                    seen.push((path, status.map_err(|e| format!("{e:#}"))));
                }
                // Paces the probes (a few hundred over the change), not a synchronisation.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            seen
        });
        let changed = drop_discounted_and_wait_for_collection(&sys, &socket, host);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let seen = prober.join().expect("the prober thread");
        changed?;
        let wrong: Vec<_> = seen
            .iter()
            .filter(|(path, status)| {
                !matches!(
                    (*path, status),
                    ("/products", Ok(200)) | ("/discounted", Ok(200 | 404))
                )
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{} of {} requests during the change got another answer: {wrong:?}",
            wrong.len(),
            seen.len()
        );
        // Once the default backend answers /discounted, the old backend never does again.
        let discounted: Vec<u16> = seen
            .iter()
            .filter(|(p, _)| *p == "/discounted")
            .filter_map(|(_, s)| s.as_ref().ok().copied())
            .collect();
        let first_404 = discounted.iter().position(|s| *s == 404);
        assert!(
            first_404.is_none_or(|i| discounted[i..].iter().all(|s| *s == 404)),
            "/discounted went back to 200 after 404: {discounted:?}"
        );
        Ok(())
    })
}

/// Applies my-ingress without `/discounted`, waits until its backend service, health check
/// and NEG are gone and `/discounted` reaches the default backend.
fn drop_discounted_and_wait_for_collection(sys: &System, socket: &str, host: &str) -> Result<()> {
    let discounted = |names: Vec<String>| {
        names
            .into_iter()
            .filter(|n| n.contains("-default-my-discounted-products-80-"))
            .collect::<Vec<_>>()
    };
    assert_eq!(discounted(sys.compute_names("backendServices")?).len(), 1);

    sys.apply(&fanout::ingress("my-ingress", None, false))?;
    wait_for(
        "my-discounted-products' backend to be collected",
        DEADLINE,
        || {
            let left = [
                discounted(sys.compute_names("backendServices")?),
                discounted(sys.compute_names("healthChecks")?),
                discounted(sys.neg_names()?),
            ]
            .concat();
            Ok(left.is_empty().then_some(()))
        },
    )
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;
    // /discounted now falls to the default backend.
    sys.wait_for_response(socket, host, "/discounted", 404, "default backend")?;
    let products: Vec<String> = sys
        .compute_names("backendServices")?
        .into_iter()
        .filter(|n| n.contains("-default-my-products-60000-"))
        .collect();
    assert_eq!(
        products.len(),
        1,
        "the products backend stays: {products:?}"
    );
    Ok(())
}
