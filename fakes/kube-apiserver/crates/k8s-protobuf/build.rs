//! Compiles the vendored `protos/**/generated.proto` (upstream's message definitions, see the
//! crate docs) into one `FileDescriptorSet` in `OUT_DIR/k8s.fds`, with `protox` (a protobuf
//! compiler in Rust: no `protoc` needed); and lists in `OUT_DIR/inline.txt` the fields that are
//! embedded Go structs (`json:",inline"`, e.g. `Volume.volumeSource`, `Probe.handler`), whose
//! fields JSON shows in the parent object. The proto files do not mark them; the OpenAPI v2
//! document the local API serves (`../../openapi/v2.json`, captured from a real v1.36 server)
//! does: such a field's name is not a property of its message's definition.

use prost::Message;
use prost_types::field_descriptor_proto::Type;

const FILES: &[&str] = &[
    "api/admissionregistration/v1/generated.proto",
    "api/apps/v1/generated.proto",
    "api/authentication/v1/generated.proto",
    "api/authorization/v1/generated.proto",
    "api/coordination/v1/generated.proto",
    "api/core/v1/generated.proto",
    "api/discovery/v1/generated.proto",
    "api/events/v1/generated.proto",
    "api/networking/v1/generated.proto",
    "api/policy/v1/generated.proto",
    "api/rbac/v1/generated.proto",
    "apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto",
];

const OPENAPI: &str = "../../openapi/v2.json";

fn main() {
    println!("cargo:rerun-if-changed=protos");
    println!("cargo:rerun-if-changed={OPENAPI}");
    let set = protox::compile(FILES, ["protos"]).expect("the vendored protos compile");
    let openapi: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(OPENAPI).expect("reading the OpenAPI v2 document"),
    )
    .expect("the OpenAPI v2 document is JSON");
    let definitions = &openapi["definitions"];
    let mut inline = Vec::new();
    for file in &set.file {
        let package = file.package();
        for message in &file.message_type {
            // `api.core.v1` -> `io.k8s.api.core.v1`; `apiextensions_apiserver...` -> `-`.
            let definition = format!("io.k8s.{}.{}", package.replace('_', "-"), message.name());
            let Some(properties) = definitions[&definition]["properties"].as_object() else {
                continue;
            };
            for field in &message.field {
                if field.r#type() == Type::Message && !properties.contains_key(field.name()) {
                    inline.push(format!("{package}.{}.{}", message.name(), field.name()));
                }
            }
        }
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("k8s.fds"), set.encode_to_vec()).expect("writing k8s.fds");
    std::fs::write(out.join("inline.txt"), inline.join("\n")).expect("writing inline.txt");
}
