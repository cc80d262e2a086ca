use std::time::Instant;
fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::Builder::new().prefix("probe").tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")).unwrap();
        let r = temper::Runtime::builder().cache_dir(Some(dir.path().to_path_buf())).build().unwrap();
        let t = Instant::now(); r.warm_up().await.unwrap(); println!("warm_up {:?}", t.elapsed());
        let t = Instant::now(); r.warm_up().await.unwrap(); println!("warm_up2 {:?}", t.elapsed());
        for i in 0..3 {
            let src = format!("function execute(input) {{ return {{ a: input.text }}; }}\n// {i}\n");
            let t = Instant::now(); let a = r.build(&src).await.unwrap(); println!("build {:?} {} {}", t.elapsed(), a.bytes.len(), &a.id[..8]);
            let tool = r.tool(&a);
            let t = Instant::now(); let o = r.call(&tool, r#"{"text":"x"}"#).await.unwrap(); println!("call {:?} {:?}", t.elapsed(), o.output);
            let t = Instant::now(); while !tool.is_compiled() { tokio::time::sleep(std::time::Duration::from_millis(1)).await; } println!("bg compile {:?}", t.elapsed());
        }
        let r2 = temper::Runtime::builder().cache_dir(None).build().unwrap();
        let a = r.build("function execute(i){return 1;}").await.unwrap();
        let t = Instant::now(); r2.load(a.bytes.to_vec()).await.unwrap(); println!("cold load {:?}", t.elapsed());
    });
}
