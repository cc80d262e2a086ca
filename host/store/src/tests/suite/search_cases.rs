//! The search index cases of the store suite (`store::search`), on each
//! backend: a caller finds its session's, its agent's and the shared
//! tools by words of their names, descriptions and parameters, never
//! another agent's or session's; a deletion, a session's end and a
//! promotion keep the index in step in their transactions.

use super::*;

fn tool(name: &str, agent: Option<&str>, tier: Tier, id: &ArtifactId, about: &str) -> ToolRecord {
    let mut r = record(name, agent, tier, id);
    r.manifest["description"] = json!(about);
    r.manifest["inputSchema"] = json!({"type": "object", "properties": {
        "sourceText": {"type": "string", "description": "the text to work on"}}});
    r
}

fn query<'a>(agent: &'a str, session: &'a str, text: &'a str) -> SearchQuery<'a> {
    SearchQuery {
        text,
        agent,
        session,
        tiers: SearchTiers::ALL,
        limit: 10,
    }
}

fn names(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

pub(super) fn search_finds_visible_tools_only(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"searchable").unwrap();
    store
        .register(tool(
            "parse_csv_rows",
            Some("alice"),
            Tier::Agent,
            &id,
            "Splits CSV text into rows.",
        ))
        .unwrap();
    store
        .register(tool(
            "slugifyTitle",
            None,
            Tier::Shared,
            &id,
            "Makes a URL slug from a title.",
        ))
        .unwrap();
    store
        .register(tool(
            "bob_csv_secret",
            Some("bob"),
            Tier::Agent,
            &id,
            "Bob's CSV rows.",
        ))
        .unwrap();
    let s = SessionRecord::new("alice", "s1", "", 60_000);
    let m = tool(
        "csv_to_json",
        None,
        Tier::Shared,
        &id,
        "Converts CSV rows to JSON.",
    )
    .manifest;
    store
        .add_session_tool(
            &s,
            "csv_to_json",
            &id,
            &m,
            &json!({"tool": "csv_to_json"}),
            10,
        )
        .unwrap();
    let other = SessionRecord::new("alice", "s2", "", 60_000);
    store
        .add_session_tool(&other, "csv_other_session", &id, &m, &json!({}), 10)
        .unwrap();

    // Name words (split snake_case), stemmed description words.
    let hits = store
        .search_tools(&query("alice", "s1", "parsing csv rows"))
        .unwrap();
    assert_eq!(names(&hits), ["parse_csv_rows", "csv_to_json"], "{hits:?}");
    assert!(hits[0].score > hits[1].score);
    assert_eq!(hits[1].tier, Tier::Session);
    // Another host on the store finds what this one indexed.
    let other_host = fx.open();
    let hits = other_host
        .search_tools(&query("alice", "s1", "parsing csv rows"))
        .unwrap();
    assert_eq!(names(&hits), ["parse_csv_rows", "csv_to_json"], "{hits:?}");
    drop(other_host);
    // camelCase split; the shared tier.
    let hits = store
        .search_tools(&query("alice", "s1", "slugify"))
        .unwrap();
    assert_eq!(names(&hits), ["slugifyTitle"]);
    assert_eq!(hits[0].tier, Tier::Shared);
    // Parameters are indexed.
    let hits = store
        .search_tools(&query("carol", "x", "source text"))
        .unwrap();
    assert_eq!(
        names(&hits),
        ["slugifyTitle"],
        "carol sees the shared tool only"
    );
    // Bob finds his own tool, not alice's; alice never finds bob's nor
    // her other session's.
    let hits = store
        .search_tools(&query("bob", "s1", "csv secret"))
        .unwrap();
    assert_eq!(names(&hits), ["bob_csv_secret"]);
    let hits = store
        .search_tools(&query("alice", "s1", "bob csv secret other session"))
        .unwrap();
    assert!(!names(&hits).contains(&"bob_csv_secret"), "{hits:?}");
    assert!(!names(&hits).contains(&"csv_other_session"), "{hits:?}");
    // The tiers narrow it.
    let mut q = query("alice", "s1", "csv rows");
    q.tiers = SearchTiers::ALL.only(Tier::Session);
    assert_eq!(names(&store.search_tools(&q).unwrap()), ["csv_to_json"]);
    // Query syntax is not interpreted (hostile input is words).
    for hostile in [
        "\"csv",
        "csv OR",
        "NEAR(csv",
        "csv) | !x",
        "* : ^",
        "'; DROP TABLE tools; --",
    ] {
        store.search_tools(&query("alice", "s1", hostile)).unwrap();
    }
    assert!(
        store
            .search_tools(&query("alice", "s1", ""))
            .unwrap()
            .is_empty()
    );

    // A deletion, a session's end and a promotion keep the index in step.
    store.delete("parse_csv_rows", "alice").unwrap();
    store.end_session("alice", "s1").unwrap();
    let hits = store
        .search_tools(&query("alice", "s1", "csv rows"))
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    store
        .promote("bob_csv_secret", "bob", Tier::Shared)
        .unwrap();
    let hits = store
        .search_tools(&query("alice", "s1", "csv secret"))
        .unwrap();
    assert_eq!(names(&hits), ["bob_csv_secret"]);
    assert_eq!(hits[0].tier, Tier::Shared);
}

pub(super) fn working_set_is_kept_with_the_session(fx: &Fixture) {
    let store = fx.open();
    let s = SessionRecord::new("alice", "w1", "", 60_000);
    assert!(store.working_set("alice", "w1").unwrap().is_empty());
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    store.add_to_working_set(&s, &v(&["a", "b"])).unwrap();
    let set = store.add_to_working_set(&s, &v(&["c", "a"])).unwrap();
    assert_eq!(set, v(&["c", "a", "b"]));
    // Another host on the store reads the same set; another session or
    // agent has its own.
    let again = fx.open();
    assert_eq!(again.working_set("alice", "w1").unwrap(), set);
    assert!(again.working_set("bob", "w1").unwrap().is_empty());
    // Bounded.
    let many: Vec<String> = (0..MAX_WORKING_SET + 10).map(|i| format!("t{i}")).collect();
    let set = store.add_to_working_set(&s, &many).unwrap();
    assert_eq!(set.len(), MAX_WORKING_SET);
    assert_eq!(set[0], "t0");
    // It ends with its session.
    store.end_session("alice", "w1").unwrap();
    assert!(store.working_set("alice", "w1").unwrap().is_empty());
}

pub(super) fn most_used_orders_by_calls(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"used").unwrap();
    for name in ["rare", "often", "never"] {
        store
            .register(tool(name, Some("alice"), Tier::Agent, &id, "x"))
            .unwrap();
    }
    store
        .register(tool("bobs", Some("bob"), Tier::Agent, &id, "x"))
        .unwrap();
    for _ in 0..3 {
        store.record_invocation("often", "alice", true, 5).unwrap();
    }
    store.record_invocation("rare", "alice", true, 5).unwrap();
    store.record_invocation("bobs", "bob", true, 5).unwrap();
    store.flush_stats().unwrap();
    assert_eq!(store.most_used("alice", 10).unwrap(), ["often", "rare"]);
    assert_eq!(store.most_used("alice", 1).unwrap(), ["often"]);
}
