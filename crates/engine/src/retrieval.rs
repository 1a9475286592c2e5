//! Finding passages: dense, BM25 and hybrid search over the knowledge base, and the reranker
//! hook that reorders hybrid search's candidates before `top_k` are shown to the model.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::{contents, literals, Engine, SearchHit, SearchMode};

/// A second pass over the passages hybrid search found (a cross-encoder, say). It gets the
/// question and `RERANK_CANDIDATES` candidates, best first, and returns them in its own order;
/// the first `top_k` are shown to the model. None is installed by default: this is the hook.
pub trait Rerank: Send + Sync {
    fn rerank(&self, question: &str, candidates: Vec<SearchHit>) -> Result<Vec<SearchHit>>;
}

/// Candidates a reranker sees per question.
pub const RERANK_CANDIDATES: usize = 20;

/// Passages `retrieve` ranks before it keeps `top_k`: 10, so hybrid search fuses the same 40
/// candidates of each list as for the 3 shown.
const LITERAL_POOL: usize = 10;

/// How deep in hybrid search's ranking a passage that prints the question's literal symbols is
/// looked for: a table row (`\$` in a list of prompt escapes) shares few words with the question
/// and ranks 15th or 50th by words and meaning alike.
const LITERAL_REACH: usize = 60;

impl Engine {
    /// Installs (or, with `None`, removes) the reranker `retrieve` applies.
    pub fn set_reranker(&self, reranker: Option<Arc<dyn Rerank>>) {
        *self.reranker.write().unwrap_or_else(|e| e.into_inner()) = reranker;
    }

    /// The passages shown to the model for `question`: hybrid search, those that print the
    /// question's literal symbols first, then the reranker if one is installed; `top_k` of them.
    pub async fn retrieve(&self, question: &str) -> Result<Vec<SearchHit>> {
        let reranker = self.reranker.read().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(reranker) = reranker else {
            let mut ranked = self.ranked(question, LITERAL_POOL.max(self.config.top_k)).await?;
            ranked.truncate(self.config.top_k);
            return Ok(ranked);
        };
        let candidates = self.ranked(question, RERANK_CANDIDATES.max(self.config.top_k)).await?;
        let q = question.to_owned();
        let mut ranked = tokio::task::spawn_blocking(move || reranker.rerank(&q, candidates))
            .await?
            .context("the reranker failed")?;
        ranked.truncate(self.config.top_k);
        Ok(ranked)
    }

    /// Hybrid search's `limit` best passages for `question`: those that hold its literal
    /// symbols word for word (`\W`, `$!`, `--bytes`) first, found among the first
    /// `LITERAL_REACH`; a table of contents or an index (`contents`) after the passages it
    /// points to. The order `retrieve` picks from.
    pub async fn ranked(&self, question: &str, limit: usize) -> Result<Vec<SearchHit>> {
        let reach = match literals::literals(question).is_empty() {
            true => limit,
            false => limit.max(LITERAL_REACH),
        };
        let hits = self.search(question, SearchMode::Hybrid, reach).await?;
        let mut ranked = contents::after_content(literals::promote(question, hits));
        ranked.truncate(limit);
        Ok(ranked)
    }

    /// The `limit` best passages for `query` in `mode`. An empty query is refused in every mode
    /// (dense search would otherwise rank passages by their closeness to nothing).
    pub async fn search(&self, query: &str, mode: SearchMode, limit: usize) -> Result<Vec<SearchHit>> {
        anyhow::ensure!(!query.trim().is_empty(), "the search is empty: give the words to search for");
        match mode {
            SearchMode::Dense => self.kb.search_dense(&self.embed_query(query).await?, limit, false).await,
            SearchMode::Bm25 => self.kb.search_bm25(query, limit).await,
            SearchMode::Hybrid => self.kb.search_hybrid(&self.embed_query(query).await?, query, limit).await,
        }
    }

    /// The words of `question` that no passage of the collection holds (as the index analyses
    /// words: stems, stop words aside), in the question's order: "Docker" in a question about
    /// documents that never say it. The prompt names them, so the model can see that the sources
    /// cannot answer. A word in one of `hits` costs nothing; any other, one keyword lookup.
    pub async fn unmentioned(&self, question: &str, hits: &[SearchHit]) -> Result<Vec<String>> {
        use std::collections::HashSet;
        let shown: HashSet<String> = hits
            .iter()
            .flat_map(|h| self.kb.blind_terms(&h.text).split(' ').map(str::to_owned).collect::<Vec<_>>())
            .collect();
        let mut unmentioned: Vec<String> = Vec::new();
        // Each word read in the question's language too: "Heizungsanlagen" is held by a passage
        // that says "Heizungsanlage".
        let language = quire_index::terms::stemming_language(question);
        // Over passages in another language than the question's (an English question, a German
        // book) its ordinary words are missing for their language, not for their subject: only
        // the words that read the same in every language (5900, /etc/skel) and names written
        // with a capital inside (VNC, IPsec) are looked for.
        let across = crate::answer::language_of(question).is_some_and(|asked| {
            crate::answer::mostly_in_another_language(asked, hits.iter().map(|h| h.text.as_str()))
        });
        // Chinese and Japanese runs are left out: without a dictionary they part into no words,
        // and a pair of their letters no document holds says nothing of what the sources cover.
        for word in crate::literals::spaced_words(question) {
            let word = word.trim_matches(|c: char| !c.is_alphanumeric());
            let named =
                crate::answer::reads_the_same_in_every_language(word) || word.chars().skip(1).any(char::is_uppercase);
            if across && !named {
                continue;
            }
            let terms = self.kb.blind_terms_in(word, language);
            if terms.is_empty()
                || language.is_some_and(|language| self.kb.is_stop_word(word, language))
                || terms.split(' ').any(|t| shown.contains(t))
                || unmentioned.iter().any(|u| u == word)
            {
                continue;
            }
            if self.kb.search_bm25_in(word, language, 1).await?.is_empty() {
                unmentioned.push(word.to_owned());
            }
        }
        Ok(unmentioned)
    }

    async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let embedder = self.embedder.clone();
        let q = query.to_owned();
        tokio::task::spawn_blocking(move || embedder.embed_query(&q)).await?
    }
}
