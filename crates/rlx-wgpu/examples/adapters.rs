//! Which adapter each wgpu device kind of this build gets here.
//! cargo run -p rlx-wgpu --example adapters
fn main() {
    for &d in rlx_wgpu::DEVICES {
        match pollster::block_on(rlx_wgpu::context::GpuContext::create(d)) {
            Ok(c) => println!("{d}: {:?}", c.info),
            Err(e) => println!("{d}: {e}"),
        }
    }
}
