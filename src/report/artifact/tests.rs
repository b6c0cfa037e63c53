//! The artifact store's unit tests: what is written is read back, cached and purged.

use super::*;

fn rendered() -> Rendered {
    Rendered {
        html: "<p>Carrier 7</p>".into(),
        text: "Carrier 7".into(),
        csv: None,
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    }
}

#[tokio::test]
async fn what_was_written_is_read_without_the_store_until_deleted() {
    let backing: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = ArtifactStore::with_store(backing.clone(), "memory://");
    let (a, wrote) = store
        .write("r", "2026-11-30", &Arc::new(rendered()))
        .await
        .expect("write");
    assert!(wrote);
    // Gone from the store behind this process's back: the bytes it wrote are still the
    // artifact (its key is their hash), and its deliveries need no read.
    backing
        .delete(&ObjectPath::from(a.html_key.as_str()))
        .await
        .expect("delete");
    assert_eq!(*store.read_rendered(&a).await.expect("read"), rendered());
    // Deleted through the store (retention): no longer served.
    store.purge("r", "2026-11-30").await.expect("purge");
    assert!(store.read_rendered(&a).await.is_err(), "purged");
    let (a, _) = store
        .write("r", "2026-11-30", &Arc::new(rendered()))
        .await
        .expect("write");
    store.delete(&a.text_key).await.expect("delete");
    assert!(store.read_rendered(&a).await.is_err(), "a part deleted");
}

#[tokio::test]
async fn a_purge_through_the_sweepers_clone_reaches_the_pools_cache() {
    // The daemon hands one store to the pool, the sweeper and the server as clones.
    let backing: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let pool = ArtifactStore::with_store(backing, "memory://");
    let sweeper = pool.clone();
    let (a, _) = pool
        .write("r", "2026-11-30", &Arc::new(rendered()))
        .await
        .expect("write");
    sweeper.purge("r", "2026-11-30").await.expect("purge");
    assert!(
        pool.read_rendered(&a).await.is_err(),
        "served after its purge"
    );
}

#[tokio::test]
async fn the_cache_keeps_the_latest_artifacts_only() {
    let backing: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = ArtifactStore::with_store(backing, "memory://");
    let mut refs = Vec::new();
    for i in 0..(RECENT + 3) {
        let r = Rendered {
            html: format!("<p>{i}</p>"),
            text: i.to_string(),
            csv: None,
            parts: Default::default(),
            images: Default::default(),
            xlsx: None,
        };
        refs.push(
            store
                .write("r", &format!("d{i}"), &Arc::new(r))
                .await
                .expect("write")
                .0,
        );
    }
    assert!(
        store.recalled(&refs[0].html_key).is_none(),
        "the oldest fell out"
    );
    assert!(store.recalled(&refs[RECENT + 2].html_key).is_some());
    assert_eq!(store.recent.lock().expect("lock").len(), RECENT);
}

/// An artifact with a named part (a chat message): written beside the others under its own
/// key, counted in the size and the sha256, found, read back and checked; missing, it makes
/// the artifact missing.
#[tokio::test]
async fn a_named_part_is_stored_counted_found_and_checked() {
    let backing: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = ArtifactStore::with_store(backing.clone(), "memory://");
    let mut with_part = rendered();
    let message = r#"{"text": "Carrier 7"}"#;
    with_part.parts.insert("probe".into(), message.into());
    let (plain, _) = (store.write("r", "d0", &Arc::new(rendered())).await).expect("write");
    let (a, _) = (store.write("r", "d1", &Arc::new(with_part.clone())).await).expect("write");
    assert_eq!(a.parts, ["probe"]);
    assert_ne!(a.sha256, plain.sha256, "the part is hashed");
    assert_eq!(a.bytes, plain.bytes + message.len() as i64, "and counted");
    let key = a.part_key("probe");
    assert_eq!(key, format!("r/d1/{}.probe.json", a.sha256));
    let stored = backing
        .get(&ObjectPath::from(key.as_str()))
        .await
        .expect("stored");
    assert_eq!(
        stored.bytes().await.expect("bytes").as_ref(),
        message.as_bytes()
    );
    let found = store.find("r", "d1").await.expect("find").expect("found");
    assert_eq!(found, a, "found again from the store's listing");
    let fresh = ArtifactStore::with_store(backing.clone(), "memory://");
    assert_eq!(*fresh.read_rendered(&a).await.expect("read"), with_part);
    assert!(matches!(
        fresh.check(&a).await.expect("check"),
        StoredArtifact::Intact(r) if r == with_part
    ));
    fresh.delete(&key).await.expect("delete");
    assert!(matches!(
        fresh.check(&a).await.expect("check"),
        StoredArtifact::Missing
    ));
}
