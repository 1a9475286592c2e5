// The ask box and the conversation, shared by the main window and the quick-ask window.
import { api, errorText, saysDamaged, type Exchange, type Turn } from "./api";
import { renderSources, retrievedPlaces, ExchangeView } from "./answer";
import { byId, el } from "./dom";
import { t } from "./i18n";
import { showPane } from "./panes";

export type Chat = {
  /// Shows an answer from the history, its markers opening its own passages.
  addPast: (x: Exchange) => void;
  /// Empties the conversation (another collection, history cleared): a new one begins.
  clear: () => void;
};

/// `onDamaged`: offered (a button on the failed answer) when an answer fails on damaged files.
export function setupChat(opts: { onAnswered?: () => void; onDamaged?: () => void } = {}): Chat {
  const form = byId<HTMLFormElement>("ask-form");
  const question = byId<HTMLTextAreaElement>("question");
  const askButton = byId<HTMLButtonElement>("ask-button");
  const stopButton = byId<HTMLButtonElement>("stop-button");
  const conversation = byId("conversation");
  const sourceList = byId("source-list");
  const sourcesEmpty = document.getElementById("sources-empty");

  // What opening a document did (or why it could not), said beside the passages, not in a
  // dialog: the passage itself is always here to read.
  const openStatus = document.getElementById("open-status");
  const open = (chunkId: string, page: number | null) => {
    const say = (text: string, error: boolean) => {
      if (!openStatus) return;
      openStatus.textContent = text;
      openStatus.className = error ? "error" : "muted";
      openStatus.hidden = false;
    };
    api.openSource(chunkId, page).then((how) => say(how, false), (e) => say(errorText(e), true));
  };
  // The answer whose passages the pane shows (none while a new answer's are only found).
  let shownFor: ExchangeView | null = null;
  const showPassagesOf = (view: ExchangeView | null) => {
    shownFor?.showing(false);
    shownFor = view;
    view?.showing(true);
    if (view) {
      renderSources(sourceList, view.places, open);
      if (openStatus) openStatus.hidden = true;
      sourceList.setAttribute("data-state", "cited");
      if (sourcesEmpty) sourcesEmpty.hidden = view.places.length > 0;
    }
  };
  const showSource = (view: ExchangeView, n: number) => {
    if (shownFor !== view) showPassagesOf(view);
    // In a narrow window the sources take the chat's place: the passage asked for is shown.
    showPane("sources");
    const item = document.getElementById(`source-${n}`);
    item?.scrollIntoView({ block: "nearest", behavior: "smooth" });
    item?.classList.add("flash");
    window.setTimeout(() => item?.classList.remove("flash"), 900);
  };

  // The conversation's turns so far: a question follows from them until "New conversation".
  let thread: Turn[] = [];
  const threadBar = byId("thread-bar");
  const showThread = () => {
    threadBar.hidden = thread.length === 0;
    byId("thread-note").textContent = t("chat.threadNote", { n: thread.length });
  };
  byId("new-conversation-button").addEventListener("click", () => {
    thread = [];
    showThread();
    if (conversation.querySelector(".exchange")) conversation.append(el("div", { className: "conversation-break", text: t("chat.newConversation") }));
    question.focus();
  });

  let busy = false;
  const setBusy = (b: boolean) => {
    busy = b;
    askButton.hidden = b;
    stopButton.hidden = !b;
    if (!b) question.focus();
  };

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const q = question.value.trim();
    if (!q || busy) return;
    question.value = "";
    setBusy(true);
    const view: ExchangeView = new ExchangeView(q, (n) => showSource(view, n));
    const earlier = thread.slice();
    view.root.setAttribute("data-follows", String(earlier.length));
    document.getElementById("chat-empty")?.remove();
    conversation.append(view.root);
    view.root.scrollIntoView({ block: "end" });
    try {
      const answer = await api.ask(q, earlier, (e) => {
        view.onEvent(e);
        view.root.scrollIntoView({ block: "end" });
        // The passages show the moment they are found, long before the first word; once the
        // answer is in, the pane keeps the ones it cites, with the quoted words marked.
        if (e.type === "retrieved") {
          showPassagesOf(null);
          renderSources(sourceList, retrievedPlaces(e.sources), open);
          if (openStatus) openStatus.hidden = true;
          sourceList.setAttribute("data-state", "retrieved");
          if (sourcesEmpty) sourcesEmpty.hidden = e.sources.length > 0;
        }
      });
      view.finish(answer);
      showPassagesOf(view);
      thread.push({ question: q, answer: answer.text });
      showThread();
      // The markers came with the finished answer and the thread bar took room below it: the
      // answer's end (its markers) brought back into view.
      view.root.scrollIntoView({ block: "end" });
      opts.onAnswered?.();
    } catch (e) {
      const message = errorText(e);
      const repair = opts.onDamaged && saysDamaged(message) ? { label: t("problems.checkRepair"), run: opts.onDamaged } : undefined;
      view.fail(message, repair);
    } finally {
      setBusy(false);
    }
  });
  question.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener("click", () => void api.cancelAnswer());
  // Esc stops an answer on its way, before anything else listening for Esc (the quick-ask
  // window hides on it) sees the key.
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && busy) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      void api.cancelAnswer();
    }
  });
  return {
    addPast(x: Exchange) {
      const view: ExchangeView = ExchangeView.past(x, (n) => showSource(view, n));
      document.getElementById("chat-empty")?.remove();
      conversation.append(view.root);
      // The conversation goes on from the history (after a restart or an unlock), as the bar says.
      thread.push({ question: x.question, answer: x.answer });
      showThread();
      // The pane is empty because no answer was picked yet, not because nothing was cited.
      if (sourcesEmpty && !shownFor)
        sourcesEmpty.textContent = t("sources.earlier");
    },
    clear() {
      conversation.replaceChildren();
      thread = [];
      showThread();
      showPassagesOf(null);
    },
  };
}
