/* VoiceIDE console: talk to the conductor in a browser, written from docs/protocol.md.
 *
 * Plain JavaScript, no build step, nothing from a CDN. Speech recognition and synthesis are the
 * browser's (Web Speech API); JSON Patch is the vendored fast-json-patch (global `jsonpatch`).
 * `window.voiceConsole` exposes what the page sent and received, for the browser tests.
 */
"use strict";

(() => {
  const CAPABILITIES = ["sentenceSpeech", "speakingState", "executingState"];
  const RECONNECT_DELAYS_S = [1, 2, 4, 8, 16];
  const BUILTIN_TOOLS = new Set(["tts.speak", "convo.setState"]);
  const LOG_LIMIT = 1000;
  const PARTIAL_EVERY_MS = 250;
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);

  // ---- small helpers --------------------------------------------------------------------------

  function uuid4() {
    const b = crypto.getRandomValues(new Uint8Array(16)); // works outside secure contexts too
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  /** Text as the conductor accepts it: a lone surrogate (a string cut inside an emoji) becomes
   * U+FFFD here, since the conductor refuses such an event (invalid_event). */
  function wellFormed(text) {
    if (typeof text !== "string") return text;
    if (typeof text.toWellFormed === "function") return text.toWellFormed();
    return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
  }

  function makeEvent(kind, payload) {
    return { id: uuid4(), timestamp: new Date().toISOString(), kind: { [kind]: payload } };
  }

  function kindOf(event) {
    const [name] = Object.keys(event.kind || {});
    return [name, event.kind ? event.kind[name] : undefined];
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  // ---- the demo project and a picked folder --------------------------------------------------

  const DEMO_FILES = {
    "Package.swift":
      '// swift-tools-version:5.9\nimport PackageDescription\n\nlet package = Package(\n    name: "Demo",\n' +
      '    targets: [\n        .executableTarget(name: "Demo"),\n        .testTarget(name: "DemoTests", dependencies: ["Demo"]),\n    ]\n)\n',
    "Sources/Demo/main.swift":
      'let input = CommandLine.arguments.dropFirst().joined(separator: " ")\n' +
      'if let tokens = Parser().parse(input) {\n    print(tokens.joined(separator: "\\n"))\n} else {\n    print("nothing to parse")\n}\n',
    "Sources/Demo/Parser.swift":
      "struct Parser {\n    /// Splits the input into words; nil for empty input.\n    func parse(_ input: String) -> [String]? {\n" +
      "        guard !input.isEmpty else { return nil }\n        return input.split(separator: \" \").map(String.init)\n    }\n}\n",
    "Tests/DemoTests/ParserTests.swift":
      "import XCTest\n@testable import Demo\n\nfinal class ParserTests: XCTestCase {\n    func testWords() {\n" +
      '        XCTAssertEqual(Parser().parse("a b"), ["a", "b"])\n    }\n\n    func testEmptyInput() {\n' +
      '        XCTAssertEqual(Parser().parse(""), [])\n    }\n}\n',
    "README.md": "# Demo\n\nA tiny Swift package for the VoiceIDE console: a parser and its tests (one fails).\n",
  };

  class DemoProject {
    constructor() {
      this.name = "the demo project (in this page)";
      this.files = new Map(Object.entries(DEMO_FILES));
      this.changed = new Set();
      this.readOnly = false;
    }
    async paths() {
      return [...this.files.keys()].sort();
    }
    async read(path) {
      return this.files.get(path);
    }
    async write(path, text) {
      this.files.set(path, text);
      this.changed.add(path);
    }
  }

  class FolderProject {
    constructor(handle, entries) {
      this.name = `the folder “${handle.name}” (read only)`;
      this.entries = entries; // path -> FileSystemFileHandle
      this.changed = new Set();
      this.readOnly = true;
    }
    static async open(handle) {
      const entries = new Map();
      const skip = new Set([".git", "node_modules", ".venv", "build", ".build", "DerivedData"]);
      async function walk(dir, prefix) {
        for await (const [name, entry] of dir.entries()) {
          if (entries.size >= 2000) return;
          if (entry.kind === "directory") {
            if (!skip.has(name)) await walk(entry, `${prefix}${name}/`);
          } else entries.set(`${prefix}${name}`, entry);
        }
      }
      await walk(handle, "");
      return new FolderProject(handle, entries);
    }
    async paths() {
      return [...this.entries.keys()].sort();
    }
    async read(path) {
      const entry = this.entries.get(path);
      if (!entry) return undefined;
      const file = await entry.getFile();
      return file.size > 512 * 1024 ? undefined : file.text();
    }
    async write() {
      throw new Error("the picked folder is read only in the console");
    }
  }

  let project = new DemoProject();

  async function resolvePath(value) {
    if (typeof value !== "string" || !value.trim()) throw new Error("a path is required");
    const wanted = value.trim().replace(/^\.?\//, "");
    const paths = await project.paths();
    if (paths.includes(wanted)) return wanted;
    const byName = paths.filter((p) => p === wanted || p.endsWith(`/${wanted}`));
    if (byName.length === 1) return byName[0];
    throw new Error(byName.length ? `ambiguous path: ${value} (${byName.join(", ")})` : `no such file: ${value}`);
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  const TOOLS = {
    async "editor.openFile"(args) {
      const path = await resolvePath(args.path);
      const text = await project.read(path);
      return { opened: path, line: args.line || 1, lines: (text || "").split("\n").length };
    },
    async "editor.readFile"(args) {
      const path = await resolvePath(args.path);
      const text = (await project.read(path)) || "";
      return { path, text: text.slice(0, 8000), truncated: text.length > 8000 };
    },
    async "editor.replaceText"(args) {
      const path = await resolvePath(args.path);
      const lines = ((await project.read(path)) || "").split("\n");
      const start = Number(args.startLine);
      const end = Number(args.endLine);
      if (!(start >= 1 && end >= start && end <= lines.length)) throw new Error("line range out of the file");
      lines.splice(start - 1, end - start + 1, ...String(args.text ?? "").split("\n"));
      await project.write(path, lines.join("\n"));
      return { replaced: { path, startLine: start, endLine: end } };
    },
    async "project.search"(args) {
      const query = String(args.query || "");
      if (!query) throw new Error("a query is required");
      const matches = [];
      for (const path of await project.paths()) {
        const text = await project.read(path);
        if (text === undefined) continue;
        text.split("\n").forEach((line, i) => {
          if (matches.length < 20 && line.toLowerCase().includes(query.toLowerCase())) {
            matches.push(`${path}:${i + 1}: ${line.trim().slice(0, 120)}`);
          }
        });
      }
      return { query, matches };
    },
    async "project.listFiles"(args) {
      const folder = String(args.path || "").replace(/^\.?\/?/, "").replace(/\/$/, "");
      const files = (await project.paths()).filter((p) => !folder || p.startsWith(`${folder}/`));
      return { path: folder || ".", files: files.slice(0, 200), truncated: files.length > 200 };
    },
    async "build.run"() {
      await sleep(2500); // a slow fake build
      return { status: "succeeded", warnings: ["Parser.swift:3: 'parse' could return an empty array"], seconds: 2.5 };
    },
    async "tests.run"(args) {
      await sleep(1200);
      return {
        filter: args.filter || null,
        passed: 1,
        failed: 1,
        failures: [
          {
            test: "ParserTests.testEmptyInput",
            file: "Tests/DemoTests/ParserTests.swift",
            line: 10,
            message: 'XCTAssertEqual failed: ("nil") is not equal to ("Optional([])")',
          },
        ],
      };
    },
    async "git.status"() {
      return { branch: "main", changed: [...project.changed] };
    },
    async "ui.showCard"(args) {
      applyPatch([{ op: "add", path: "/cards/-", value: { type: args.type, title: args.title, body: args.body || "" } }]);
      return { shown: true };
    },
  };

  // ---- settings and session -------------------------------------------------------------------

  const store = {
    get(key) {
      try {
        return localStorage.getItem(`voiceide.${key}`);
      } catch {
        return null;
      }
    },
    set(key, value) {
      try {
        if (value === null) localStorage.removeItem(`voiceide.${key}`);
        else localStorage.setItem(`voiceide.${key}`, value);
      } catch {
        /* storage may be off: the session lasts as long as the page */
      }
    },
  };

  const defaultUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
  const settings = {
    url: params.get("url") || defaultUrl, // a stage's URL: ?url=wss://…&token=… or the settings
    token: params.get("token") || null,
    sessionId: (params.get("sessionId") || store.get("sessionId") || uuid4()).toLowerCase(),
    speakAloud: store.get("speakAloud") !== "false",
  };
  store.set("sessionId", settings.sessionId);
  const signIn = { password: null, expiresAt: 0, config: {} };

  function lastSeq() {
    return Number(store.get(`lastSeq.${settings.sessionId}`) || 0);
  }

  // ---- the event log and what tests read ------------------------------------------------------

  const record = { sent: [], received: [], gatewayFrames: [] };
  let logCount = 0;

  function summary(event) {
    const [name, payload] = kindOf(event);
    if (!name) return JSON.stringify(event).slice(0, 100);
    if (name === "toolCall") return `toolCall ${payload.name} ${payload.arguments}`.slice(0, 140);
    if (payload && typeof payload.text === "string") return `${name} “${payload.text}”`.slice(0, 140);
    return `${name} ${JSON.stringify(payload)}`.slice(0, 140);
  }

  function logEvent(direction, event) {
    const list = $("log");
    const time = new Date().toISOString().slice(11, 23);
    const seq = event.seq !== undefined ? ` #${event.seq}` : "";
    const line = el("summary", {}, `${time} ${direction === "in" ? "←" : "→"}${seq} ${summary(event)}`);
    const item = el("li", { class: direction }, el("details", {}, line, el("pre", { text: JSON.stringify(event, null, 2) })));
    list.append(item);
    while (list.children.length > LOG_LIMIT) list.firstElementChild.remove();
    $("log-count").textContent = String(++logCount);
  }

  // ---- transcript, cards, state ---------------------------------------------------------------

  const transcript = $("transcript");
  let assistantBubble = null;
  let interimBubble = null;

  function scrollDown() {
    transcript.scrollTop = transcript.scrollHeight;
  }

  function bubble(cls, who, text) {
    const body = el("span", { class: "body", text });
    const item = el("li", { class: cls }, el("span", { class: "who", text: who }), body);
    transcript.append(item);
    scrollDown();
    return item;
  }

  function note(text, cls = "note") {
    const item = el("li", { class: cls, text });
    transcript.append(item);
    scrollDown();
  }

  function showPartial(text) {
    if (!assistantBubble) {
      assistantBubble = bubble("assistant partial", "assistant", "");
      assistantBubble.setAttribute("aria-busy", "true");
    }
    assistantBubble.querySelector(".body").textContent = text;
    scrollDown();
  }

  function showFinal(text, interrupted) {
    const item = assistantBubble || bubble("assistant", "assistant", "");
    assistantBubble = null;
    item.classList.remove("partial");
    item.removeAttribute("aria-busy");
    item.querySelector(".body").textContent = text;
    if (interrupted) {
      item.classList.add("interrupted");
      item.append(el("span", { class: "mark", text: text ? " — interrupted" : "(interrupted: nothing was heard)" }));
    }
    scrollDown();
  }

  function showInterim(text) {
    if (!interimBubble) interimBubble = bubble("you interim", "you (hearing…)", "");
    interimBubble.querySelector(".body").textContent = text;
  }

  function showUser(text) {
    if (interimBubble) interimBubble.remove();
    interimBubble = null;
    bubble("you", "you", text);
  }

  let uiModel = { cards: [] };

  function applyPatch(operations) {
    const next = JSON.parse(JSON.stringify(uiModel));
    try {
      jsonpatch.applyPatch(next, operations, true, true); // validated; on any error none of it applies
    } catch (error) {
      logEvent("in", { note: `a UI patch did not apply: ${error.message}` });
      return false;
    }
    uiModel = next;
    renderCards();
    return true;
  }

  function renderCards() {
    const box = $("cards");
    box.replaceChildren();
    const cards = Array.isArray(uiModel.cards) ? uiModel.cards : [];
    if (!cards.length) box.append(el("p", { class: "empty", text: "No cards yet." }));
    cards.forEach((card, i) => {
      const title = el("h3", { id: `card-${i}` }, card.title || card.type || "card");
      if (card.file) title.append(el("span", { class: "file", text: ` · ${card.file}` }));
      const code = el("code", { text: card.body || "" });
      if (card.language) code.setAttribute("data-language", card.language);
      box.append(el("article", { class: `card card-${card.type}`, "aria-labelledby": `card-${i}` }, title, el("pre", {}, code)));
    });
  }

  let convoState = "idle";

  function setState(state) {
    convoState = state;
    const node = $("state");
    node.textContent = state;
    node.className = `state state-${state}`;
  }

  function setConnection(text, cls) {
    const node = $("connection");
    node.textContent = text;
    node.className = `connection ${cls || ""}`;
  }

  // ---- the timeline ---------------------------------------------------------------------------

  const turns = [];
  const MARKS = [
    ["thinking", "thinking"],
    ["partial", "first partial"],
    ["speak", "first tts.speak"],
    ["idle", "idle"],
  ];

  function startTurn(text) {
    turns.push({ text, t0: performance.now(), marks: {} });
    renderTimeline();
  }

  function mark(name) {
    const turn = turns[turns.length - 1];
    if (!turn || turn.marks.idle !== undefined || turn.marks[name] !== undefined) return;
    turn.marks[name] = Math.round(performance.now() - turn.t0);
    renderTimeline();
  }

  function renderTimeline() {
    const box = $("timeline");
    box.replaceChildren();
    for (const turn of turns.slice(-6)) {
      const end = turn.marks.idle ?? Math.max(1, ...Object.values(turn.marks));
      const bar = el("div", { class: "bar", "aria-hidden": "true" });
      let from = 0;
      for (const [name] of MARKS) {
        const at = turn.marks[name];
        if (at === undefined) continue;
        const seg = el("span", { class: `seg-${name}` });
        seg.style.left = `${(100 * from) / end}%`;
        seg.style.width = `${Math.max(0.5, (100 * (at - from)) / end)}%`;
        bar.append(seg);
        from = Math.max(from, at);
      }
      const marks = el("div", { class: "marks" });
      for (const [name, label] of MARKS) {
        const at = turn.marks[name];
        const item = el("span", { class: `mark-${name}`, text: `${label}: ${at === undefined ? "–" : `${at} ms`}` });
        if (at !== undefined) item.setAttribute("data-ms", String(at));
        marks.append(item);
      }
      box.append(el("div", { class: "turn-row" }, el("span", { class: "label", text: `“${turn.text}”` }), bar, marks));
    }
  }

  // ---- the connection -------------------------------------------------------------------------

  const conn = { ws: null, attempt: 0, timer: null, outbox: [], started: false, userClosed: false };
  const seenIds = new Set();
  const answered = new Map(); // callId -> the toolResult event (resent as is when the call comes again)

  function tokenExpiry(token) {
    try {
      const claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
      return typeof claims.exp === "number" ? claims.exp * 1000 : 0;
    } catch {
      return 0;
    }
  }

  async function socketUrl() {
    if (settings.token && signIn.password && tokenExpiry(settings.token) - Date.now() < 60000) {
      await cognitoSignIn(); // refresh an ID token about to expire before the handshake
    }
    const url = new URL(settings.url);
    url.searchParams.set("sessionId", settings.sessionId);
    if (settings.token) url.searchParams.set("token", settings.token);
    return url.toString();
  }

  async function connect() {
    clearTimeout(conn.timer);
    conn.userClosed = false;
    let url;
    try {
      url = await socketUrl();
    } catch (error) {
      setConnection(`cannot connect: ${error.message}`, "down");
      return;
    }
    setConnection(conn.attempt ? `reconnecting (attempt ${conn.attempt})…` : "connecting…");
    const ws = new WebSocket(url);
    conn.ws = ws;
    conn.started = false;
    ws.onopen = () => {
      if (conn.ws !== ws) return;
      conn.attempt = 0;
      const start = { sessionId: settings.sessionId, capabilities: CAPABILITIES };
      if (lastSeq() > 0) start.lastSeq = lastSeq();
      sendNow(makeEvent("sessionStart", start));
      conn.started = true;
      setConnection(`connected · session ${settings.sessionId}`, "live");
      const waiting = conn.outbox.splice(0);
      waiting.forEach(sendNow);
    };
    ws.onmessage = (message) => {
      if (conn.ws === ws) receive(message.data);
    };
    ws.onclose = () => {
      if (conn.ws !== ws) return;
      conn.ws = null;
      conn.started = false;
      if (conn.userClosed) {
        setConnection("disconnected");
        return;
      }
      if (conn.attempt >= RECONNECT_DELAYS_S.length) {
        setConnection("offline: every reconnection attempt failed (reconnect_failed)", "down");
        note("Offline: the conductor cannot be reached. Use Connect to try again.", "error");
        record.sent.push(makeEvent("error", { code: "reconnect_failed", message: "every reconnection attempt failed" }));
        return;
      }
      const delay = RECONNECT_DELAYS_S[conn.attempt++];
      setConnection(`connection lost: retrying in ${delay} s`, "down");
      conn.timer = setTimeout(connect, delay * 1000);
    };
  }

  function disconnect() {
    conn.userClosed = true;
    clearTimeout(conn.timer);
    if (conn.ws) conn.ws.close(1000);
  }

  function sendNow(event) {
    conn.ws.send(JSON.stringify(event));
    record.sent.push(event);
    logEvent("out", event);
  }

  function send(event) {
    if (conn.ws && conn.ws.readyState === WebSocket.OPEN && conn.started) sendNow(event);
    else conn.outbox.push(event); // sent once a connection is back, with the same id
  }

  function receive(data) {
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      logEvent("in", { undecodable: String(data).slice(0, 200) });
      return;
    }
    if (!event || typeof event !== "object" || !event.kind) {
      record.gatewayFrames.push(event); // API Gateway's own frames: not events, only logged
      logEvent("in", event);
      return;
    }
    if (seenIds.has(event.id)) return; // a replayed event already handled
    seenIds.add(event.id);
    if (Number.isInteger(event.seq) && event.seq > lastSeq()) store.set(`lastSeq.${settings.sessionId}`, String(event.seq));
    record.received.push(event);
    logEvent("in", event);
    const [name, payload] = kindOf(event);
    try {
      handle(name, payload || {});
    } catch (error) {
      console.error("could not handle", event, error);
    }
  }

  function handle(name, payload) {
    switch (name) {
      case "assistantSpeechPartial":
        mark("partial");
        showPartial(payload.text || "");
        break;
      case "assistantSpeechFinal":
        showFinal(payload.text || "", payload.interrupted === true);
        break;
      case "assistantUIPatch": {
        let operations;
        try {
          operations = JSON.parse(payload.patch);
        } catch {
          return;
        }
        applyPatch(operations);
        break;
      }
      case "toolCall":
        onToolCall(payload);
        break;
      case "error":
        note(`error ${payload.code}: ${payload.message || ""}`, "error");
        break;
      default:
        break; // kinds this console does not know are ignored
    }
  }

  function answer(callId, result, error = null) {
    const event = makeEvent("toolResult", {
      callId,
      result: result === null ? null : wellFormed(JSON.stringify(result)),
      error: error === null ? null : wellFormed(String(error)),
    });
    answered.set(callId, event);
    send(event);
  }

  function onToolCall(call) {
    if (answered.has(call.callId)) {
      send(answered.get(call.callId)); // the same result again (same id): harmless
      return;
    }
    let args = {};
    try {
      args = JSON.parse(call.arguments || "{}");
    } catch {
      answer(call.callId, null, "arguments are not JSON");
      return;
    }
    if (call.name === "convo.setState") {
      setState(String(args.state || "idle"));
      if (args.state === "thinking") mark("thinking");
      if (args.state === "idle") mark("idle");
      answer(call.callId, { ok: true });
      return;
    }
    if (call.name === "tts.speak") {
      mark("speak");
      speech.enqueue(call.callId, String(args.text || ""));
      return;
    }
    speech.heardParts = []; // the model's tools end the answer being spoken
    note(`→ ${call.name} ${call.arguments}`);
    const tool = TOOLS[call.name];
    if (!tool) {
      answer(call.callId, null, `the console has no tool ${call.name}`);
      return;
    }
    tool(args).then(
      (result) => answer(call.callId, result),
      (error) => answer(call.callId, null, error.message || String(error)),
    );
  }

  // ---- listening: speech output and barge-in ---------------------------------------------------

  const speech = {
    queue: [],
    current: null,
    heardParts: [], // what was heard of the answer being spoken
    dropping: false, // after a barge-in, speech of the interrupted answer is not played

    enqueue(callId, text) {
      if (this.dropping) {
        answer(callId, { spoken: false, heardText: wellFormed(this.heard()) });
        return;
      }
      this.queue.push({ callId, text });
      if (!this.current) this.next();
    },

    next() {
      const item = this.queue.shift();
      this.current = item || null;
      if (!item) return;
      item.heardUpTo = 0;
      const synth = window.speechSynthesis;
      if (!settings.speakAloud || !synth || typeof SpeechSynthesisUtterance === "undefined") {
        setTimeout(() => this.done(item), 0); // shown, not spoken: answered as played
        return;
      }
      const utterance = new SpeechSynthesisUtterance(item.text);
      utterance.onboundary = (e) => {
        if (item.cancelled || (e.name && e.name !== "word")) return;
        const rest = item.text.slice(e.charIndex);
        const length = e.charLength || (rest.match(/^\S+/) || [""])[0].length;
        item.heardUpTo = Math.max(item.heardUpTo, e.charIndex + length);
      };
      utterance.onend = () => {
        if (!item.cancelled) this.done(item);
      };
      utterance.onerror = () => {
        if (item.cancelled) return;
        item.cancelled = true;
        answer(item.callId, { spoken: false, heardText: wellFormed(this.heard()) });
        this.current = null;
        this.next();
      };
      synth.speak(utterance);
    },

    done(item) {
      if (item.cancelled) return;
      this.heardParts.push(item.text);
      answer(item.callId, { spoken: true });
      this.current = null;
      this.next();
    },

    heard() {
      const parts = [...this.heardParts];
      if (this.current && this.current.heardUpTo) parts.push(this.current.text.slice(0, this.current.heardUpTo));
      return parts.join(" ").trim();
    },

    active() {
      return Boolean(this.current || this.queue.length);
    },

    /** Stop playback; every speak call not played in full is answered as interrupted. */
    stop(heard) {
      const items = [this.current, ...this.queue].filter(Boolean);
      this.queue = [];
      this.current = null;
      for (const item of items) item.cancelled = true;
      if (window.speechSynthesis) window.speechSynthesis.cancel();
      for (const item of items) answer(item.callId, { spoken: false, heardText: wellFormed(heard) });
    },
  };

  /** The user talked over the answer (or pressed Escape): stop it, as the protocol says. */
  function bargeIn(why) {
    if (!speech.active() && convoState === "idle") return false;
    const heard = speech.heard();
    send(makeEvent("error", { code: "audio.output.interrupted", message: why, heardText: wellFormed(heard) }));
    speech.stop(heard);
    speech.dropping = true;
    return true;
  }

  // ---- talking: typed text and speech recognition ---------------------------------------------

  let lastPartialAt = 0;

  function sendPartial(text) {
    const now = performance.now();
    if (now - lastPartialAt < PARTIAL_EVERY_MS) return;
    lastPartialAt = now;
    send(makeEvent("userAudioTranscriptPartial", { text: wellFormed(text) }));
  }

  function sendFinal(text) {
    text = wellFormed(text.trim());
    if (!text) return;
    if (speech.active()) bargeIn("the user started a new request");
    speech.dropping = false;
    speech.heardParts = [];
    showUser(text);
    startTurn(text);
    send(makeEvent("userAudioTranscriptFinal", { text }));
  }

  const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
  const mic = { rec: null, mode: null, heardInterim: false };

  function startListening(mode) {
    if (!Recognition || mic.rec) return;
    const rec = new Recognition();
    rec.lang = navigator.language || "en-US";
    rec.interimResults = true;
    rec.continuous = mode === "hands-free";
    mic.rec = rec;
    mic.mode = mode;
    rec.onresult = (e) => {
      let interim = "";
      for (let i = e.resultIndex; i < e.results.length; i++) {
        const result = e.results[i];
        const text = result[0] ? result[0].transcript : "";
        if (result.isFinal) {
          if (text.trim()) sendFinal(text);
        } else interim += text;
      }
      if (interim.trim()) {
        if (speech.active()) bargeIn("the user spoke over the answer");
        showInterim(interim);
        sendPartial(interim);
      }
    };
    rec.onerror = (e) => {
      if (e.error !== "no-speech" && e.error !== "aborted") note(`speech recognition: ${e.error}`, "error");
    };
    rec.onend = () => {
      const wasHandsFree = mic.mode === "hands-free" && $("hands-free").checked;
      mic.rec = null;
      mic.mode = null;
      if (interimBubble) {
        interimBubble.remove();
        interimBubble = null;
      }
      if (wasHandsFree) startListening("hands-free");
      else $("listening").hidden = true;
    };
    $("listening").hidden = false;
    rec.start();
  }

  function stopListening() {
    if (mic.rec) mic.rec.stop();
  }

  // ---- sign-in ----------------------------------------------------------------------------------

  async function cognitoSignIn() {
    const region = $("region").value.trim() || "us-east-1";
    const endpoint = $("cognito-endpoint").value.trim() || `https://cognito-idp.${region}.amazonaws.com/`;
    const password = $("password").value || signIn.password;
    const response = await fetch(endpoint, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "AWSCognitoIdentityProviderService.InitiateAuth",
      },
      body: JSON.stringify({
        AuthFlow: "USER_PASSWORD_AUTH",
        ClientId: $("client-id").value.trim(),
        AuthParameters: { USERNAME: $("username").value.trim(), PASSWORD: password },
      }),
    });
    const body = await response.json().catch(() => ({}));
    const token = body.AuthenticationResult && body.AuthenticationResult.IdToken;
    if (!response.ok || !token) throw new Error(`sign-in failed (${body.__type || response.status})`);
    signIn.password = password; // kept in memory only, to sign in again before the token expires
    $("password").value = "";
    settings.token = token;
  }

  // ---- wiring -----------------------------------------------------------------------------------

  async function renderFiles() {
    $("files").replaceChildren(...(await project.paths()).map((p) => el("li", { text: p })));
    $("project-name").textContent = `Tools answer from ${project.name}.`;
  }

  function wire() {
    $("url").value = settings.url;
    $("session-id").value = settings.sessionId;
    $("speak-aloud").checked = settings.speakAloud;

    $("say-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sendFinal($("say").value);
      $("say").value = "";
    });
    $("say").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        $("say-form").requestSubmit();
      }
    });
    $("barge-in").addEventListener("click", () => bargeIn("the user stopped the answer"));
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape") bargeIn("the user stopped the answer");
    });

    if (Recognition) {
      const talk = $("talk");
      talk.disabled = false;
      $("hands-free").disabled = false;
      const down = () => {
        talk.classList.add("active");
        talk.setAttribute("aria-pressed", "true");
        startListening("push-to-talk");
      };
      const up = () => {
        talk.classList.remove("active");
        talk.setAttribute("aria-pressed", "false");
        if (mic.mode === "push-to-talk") stopListening();
      };
      talk.addEventListener("pointerdown", down);
      talk.addEventListener("pointerup", up);
      talk.addEventListener("pointerleave", up);
      talk.addEventListener("keydown", (e) => {
        if ((e.key === " " || e.key === "Enter") && !e.repeat) {
          e.preventDefault();
          down();
        }
      });
      talk.addEventListener("keyup", (e) => {
        if (e.key === " " || e.key === "Enter") {
          e.preventDefault();
          up();
        }
      });
      $("hands-free").addEventListener("change", (e) => {
        if (e.target.checked) startListening("hands-free");
        else stopListening();
      });
    } else {
      $("no-recognition").hidden = false;
    }

    $("speak-aloud").addEventListener("change", (e) => {
      settings.speakAloud = e.target.checked;
      store.set("speakAloud", String(e.target.checked));
    });
    $("settings-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      settings.url = $("url").value.trim() || defaultUrl;
      const sessionId = $("session-id").value.trim().toLowerCase();
      if (sessionId && sessionId !== settings.sessionId) {
        settings.sessionId = sessionId;
        store.set("sessionId", sessionId);
      }
      if ($("client-id").value.trim() && $("username").value.trim()) {
        try {
          await cognitoSignIn();
        } catch (error) {
          setConnection(error.message, "down");
          return;
        }
      }
      disconnect();
      conn.attempt = 0;
      connect();
    });
    $("new-session").addEventListener("click", () => {
      settings.sessionId = uuid4();
      store.set("sessionId", settings.sessionId);
      $("session-id").value = settings.sessionId;
      transcript.replaceChildren();
      uiModel = { cards: [] };
      renderCards();
      turns.length = 0;
      renderTimeline();
      disconnect();
      conn.attempt = 0;
      connect();
    });
    if (typeof window.showDirectoryPicker === "function") {
      $("pick-folder").hidden = false;
      $("pick-folder").addEventListener("click", async () => {
        try {
          project = await FolderProject.open(await window.showDirectoryPicker({ mode: "read" }));
          renderFiles();
        } catch (error) {
          if (error.name !== "AbortError") note(`could not open the folder: ${error.message}`, "error");
        }
      });
    }
  }

  async function start() {
    wire();
    renderFiles();
    renderCards();
    if (lastSeq() > 0) note(`Resumed session ${settings.sessionId}: what was said before this page is not shown.`);
    try {
      const response = await fetch("/console/config.json", { cache: "no-store" });
      signIn.config = response.ok ? await response.json() : {};
    } catch {
      signIn.config = {};
    }
    const config = signIn.config;
    if (config.auth === "cognito" && !settings.token) {
      $("region").value = config.region || "";
      $("client-id").value = config.clientId || "";
      $("cognito-endpoint").value = config.cognitoEndpoint || "";
      if (config.testUser) {
        $("username").value = config.testUser.username;
        $("password").value = config.testUser.password;
        try {
          await cognitoSignIn();
        } catch (error) {
          setConnection(error.message, "down");
          $("settings-panel").open = true;
          return;
        }
      } else {
        $("settings-panel").open = true;
        setConnection("sign in to connect");
        return;
      }
    }
    connect();
  }

  window.voiceConsole = {
    record,
    get state() {
      return convoState;
    },
    get sessionId() {
      return settings.sessionId;
    },
    get uiModel() {
      return uiModel;
    },
    get connected() {
      return Boolean(conn.ws && conn.started);
    },
    turns,
    say: sendFinal,
    bargeIn,
  };

  start();
})();
