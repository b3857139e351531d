//! Generates the gRPC client and server of the local echo workload's `gclb.echo.v1.Echo`
//! service with tonic's codegen, from the service described here (tonic-build's `manual`
//! builder): no `.proto` file and no `protoc`. The messages are declared with prost's derive in
//! `src/local/echo/grpc.rs`.

fn main() {
    let codec = "tonic_prost::ProstCodec";
    let request = "crate::local::echo::grpc::EchoRequest";
    let reply = "crate::local::echo::grpc::EchoReply";
    let method = |name: &str, route: &str| {
        tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type(request)
            .output_type(reply)
            .codec_path(codec)
    };
    let service = tonic_build::manual::Service::builder()
        .name("Echo")
        .package("gclb.echo.v1")
        .method(method("unary", "Unary").build())
        .method(
            method("server_stream", "ServerStream")
                .server_streaming()
                .build(),
        )
        .method(
            method("client_stream", "ClientStream")
                .client_streaming()
                .build(),
        )
        .method(
            method("bidi", "Bidi")
                .client_streaming()
                .server_streaming()
                .build(),
        )
        .build();
    tonic_build::manual::Builder::new()
        .build_transport(false)
        .compile(&[service]);
}
