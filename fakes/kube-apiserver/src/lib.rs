//! A local Kubernetes API server for tests and the demo: real wire protocol (discovery, CRUD,
//! watch, patches, status subresource, finalizers, CRDs) plus local controllers.
//! See docs/kube-apiserver.md for what is supported and what is simplified.

pub mod admission;
pub mod auth;
pub mod crd_defaults;
pub mod crd_transition_rules;
pub mod crd_validation;
pub mod crds;
pub mod defaults;
pub mod discovery;
pub mod events;
pub mod go_values;
pub mod handlers;
pub mod kubeconfig;
pub mod local;
pub mod managed_fields;
pub mod meta;
pub mod openapi;
pub mod openapi_v2;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod state_file;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;
pub mod watch;
