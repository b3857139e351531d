//! Each crate's layers, from the top down: a module may import from its own layer and the
//! layers below it, never from one above (docs/architecture.md shows the same table). An entry
//! covers the module and everything under it; the crate root (`lib.rs`) is above every layer.
//! Of the binaries only the operator's declares modules of its own (`cli`); the others are one
//! `main.rs` each.

use gclb_architecture::CrateSpec;

pub const CRATES: &[CrateSpec] = &[
    CrateSpec {
        name: "gclb-operator",
        root: "src/lib.rs",
        // The controllers, independent of each other; each builds on the crates below.
        layers: &[&["controller", "gateway", "managed_certificates", "webhook"]],
    },
    CrateSpec {
        name: "gclb-operator (bin)",
        root: "src/main.rs",
        // main.rs on top of its command line.
        layers: &[&["cli"]],
    },
    CrateSpec {
        name: "gclb-readiness",
        root: "crates/readiness/src/lib.rs",
        layers: &[&["readiness"]],
    },
    CrateSpec {
        name: "gclb-sync",
        root: "crates/sync/src/lib.rs",
        // desired vs observed, on top of the Compute API seam.
        layers: &[&["sync"], &["compute"]],
    },
    CrateSpec {
        name: "gclb-translate",
        root: "crates/translate/src/lib.rs",
        // cluster snapshot -> desired load balancer, on top of the CRD types.
        layers: &[&["translate"], &["crd"]],
    },
    CrateSpec {
        name: "gce-emulator",
        root: "fakes/gce-emulator/src/lib.rs",
        layers: &[
            // HTTP routing: the one router over every handler.
            &["api"],
            // handlers of the routes besides the Compute API, and what every handler does with
            // a request.
            &[
                "admin",
                "api_request",
                "batch",
                "dashboard",
                "identity_api",
                "logging_api",
                "state_file",
            ],
            // the Compute API's control plane: requests, operations, and resources/mod.rs, which
            // dispatches a request to its collection.
            &[
                "emulator",
                "explain_cli",
                "methods",
                "operations",
                "resources",
            ],
            // the Compute collections under resources/ (resources/mod.rs, above, dispatches a
            // request to them): one module per collection serving every scope it has, and the
            // rules between collections (load balancing schemes, reference scopes, the default
            // network of a project).
            &[
                "resources::addresses",
                "resources::backend_services",
                "resources::default_network",
                "resources::firewalls",
                "resources::forwarding_rules",
                "resources::health_checks",
                "resources::instance_groups",
                "resources::instances",
                "resources::load_balancing_schemes",
                "resources::network_endpoint_groups",
                "resources::networks",
                "resources::projects",
                "resources::reference_scopes",
                "resources::security_policies",
                "resources::ssl_certificates",
                "resources::ssl_policies",
                "resources::subnetworks",
                "resources::target_http_proxies",
                "resources::target_https_proxies",
                "resources::target_ssl_proxies",
                "resources::target_tcp_proxies",
                "resources::tls_routes",
                "resources::url_maps",
                "resources::zones",
            ],
            // what every collection shares: the table of collections, and `Prepare` with the
            // references it resolves.
            &["resources::collections", "resources::references"],
            // the data plane the control plane publishes snapshots to: serving core on top of the
            // features on top of the shared request/response types, as the data plane's own
            // modules say (it reads no collection: project numbers come from `project_number`).
            &["dataplane"],
            // the models the control plane keeps.
            &[
                "addresses",
                "health_state",
                "iam_permissions",
                "iam_policy",
                "identity",
                "listing",
                "network",
                "options",
                "slow_cloud",
                "store",
            ],
            // shared leaves.
            &[
                "api_fuzz_tests",
                "ca",
                "calls",
                "faults",
                "filter",
                "fuzz_support",
                "iam",
                "iam_roles",
                "metadata",
                "metrics",
                "open_files",
                "project_number",
                "schema",
                "snapshot",
                "tokens",
            ],
        ],
    },
    CrateSpec {
        name: "gce-url-map",
        root: "fakes/gce-emulator/crates/url-map/src/lib.rs",
        layers: &[&["url_map"]],
    },
    CrateSpec {
        name: "gce-validate",
        root: "fakes/gce-emulator/crates/validate/src/lib.rs",
        // request validation, on top of Google's error shape.
        layers: &[&["validate"], &["errors"]],
    },
    CrateSpec {
        name: "fake-kube-apiserver",
        root: "fakes/kube-apiserver/src/lib.rs",
        layers: &[
            // the server; the local controllers and kubelet (kube-rs clients of it, importing
            // nothing of it).
            &["local", "server"],
            // request handlers.
            &["handlers", "kubeconfig"],
            // the request pipeline: admission, authentication and RBAC, patches, watches.
            &["admission", "auth", "patch", "state_file", "watch"],
            // storage and field ownership.
            &["managed_fields", "store"],
            // schemas, validation and each kind's defaults and tables.
            &[
                "crd_defaults",
                "crd_transition_rules",
                "crds",
                "defaults",
                "discovery",
                "openapi",
                "openapi_v2",
                "protobuf",
                "status",
                "table",
                "validation",
            ],
            // shared leaves.
            &[
                "crd_validation",
                "events",
                "go_values",
                "meta",
                "registry",
                "schema",
                "selectors",
                "tls",
            ],
        ],
    },
];
