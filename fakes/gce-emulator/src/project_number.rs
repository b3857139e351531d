//! Project numbers: the emulator derives each project's number from its id, so that the
//! control plane (`resources::projects`, default service accounts) and the data plane (request
//! logs' `backendTargetProjectNumber` and IAP's JWT audience, which carry the number) agree
//! without sharing state.

/// The project number the emulator gives `project` (stable: derived from its id).
pub fn number(project: &str) -> u64 {
    // FNV-1a over the id, folded into 12 decimal digits like real project numbers.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in project.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    100_000_000_000 + h % 900_000_000_000
}
