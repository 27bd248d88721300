//! What signing and verifying one assertion costs with HMAC-SHA256 (one key
//! per receiver, the scheme in use) and with Ed25519 (the alternative: the
//! gateway signs, services hold public keys), both through ring, on a payload
//! the size of a real assertion. Run: `cargo run --release -p service-kit
//! --example assertion_cost`.

use ring::{
    hmac,
    rand::SystemRandom,
    signature::{self, Ed25519KeyPair, KeyPair},
};
use std::{hint::black_box, time::Instant};

fn per_op(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(n) / 1000.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A base64url assertion with one membership is about 700 bytes.
    let payload = vec![b'x'; 700];
    let n = 20_000;

    let key = hmac::Key::new(hmac::HMAC_SHA256, b"gateway-to-identity-key-material");
    let tag = hmac::sign(&key, &payload);
    let hmac_sign = per_op(n, || {
        black_box(hmac::sign(&key, black_box(&payload)));
    });
    let hmac_verify = per_op(n, || {
        black_box(hmac::verify(&key, black_box(&payload), tag.as_ref()).is_ok());
    });

    let rng = SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| "keygen")?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|_| "key")?;
    let public =
        signature::UnparsedPublicKey::new(&signature::ED25519, pair.public_key().as_ref().to_vec());
    let sig = pair.sign(&payload);
    let ed_sign = per_op(n, || {
        black_box(pair.sign(black_box(&payload)));
    });
    let ed_verify = per_op(n, || {
        black_box(public.verify(black_box(&payload), sig.as_ref()).is_ok());
    });

    println!(
        "per assertion, {} byte payload, {n} runs each:",
        payload.len()
    );
    println!("  HMAC-SHA256  sign {hmac_sign:6.2} us   verify {hmac_verify:6.2} us");
    println!("  Ed25519      sign {ed_sign:6.2} us   verify {ed_verify:6.2} us");
    println!(
        "  Ed25519 / HMAC per request (sign + verify): {:.0}x",
        (ed_sign + ed_verify) / (hmac_sign + hmac_verify)
    );
    Ok(())
}
