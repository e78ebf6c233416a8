//! Compiles `proto/` into prost types with ProtoJSON serde (pbjson) and the `A2AService`
//! gRPC server and client (tonic, over the same types), then lets napi-build set the linker
//! flags a Node addon needs.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    napi_build::setup();

    let proto = "proto/lf/a2a/v1/a2a.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let descriptors = fds.encode_to_vec();

    let mut prost = prost_build::Config::new();
    prost
        // Timestamp gets our own type: ProtoJSON output must be `Z`-normalised, which
        // pbjson-types' Timestamp is not. The other well-known types come from pbjson-types.
        .extern_path(".google.protobuf.Timestamp", "crate::wire::Timestamp")
        .compile_well_known_types()
        .extern_path(".google.protobuf", "::pbjson_types")
        // The client serves the tests (and any embedder dialing a gRPC agent); no
        // `transport` code: the server is served from our own accept loop.
        .service_generator(
            tonic_prost_build::configure()
                .build_server(true)
                .build_client(true)
                .build_transport(false)
                .service_generator(),
        )
        .compile_fds(fds)?;

    pbjson_build::Builder::new()
        .register_descriptors(&descriptors)?
        // The binding's forward-compatibility rule: unknown members are ignored (an older
        // client's `kind`, a member a newer minor version adds); known members stay strict.
        .ignore_unknown_fields()
        .extern_path(".google.protobuf.Timestamp", "crate::wire::Timestamp")
        .build(&[".lf.a2a.v1"])?;
    Ok(())
}
