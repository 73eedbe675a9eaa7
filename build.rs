fn main() {
    // The store embeds migrations/*.sql with include_str!; rebuild when they change.
    println!("cargo:rerun-if-changed=migrations");
}
