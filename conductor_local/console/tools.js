/* Tools: the editor, project, build, test, git and UI tools the conductor calls, answered from the
 * demo project held in this page or from a folder picked on this computer (read only). */

import { $, el } from "./dom.js";
import { applyPatch, note } from "./view.js";

// ---- the demo project and a picked folder -------------------------------------------------------

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

/** Wait `ms`, or fail as soon as `signal` aborts (the conductor cancelled the call). */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(new Error("cancelled"));
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new Error("cancelled"));
    });
  });
}

const DEMO_BUILD_STEPS = [
  "Compiling Parser.swift",
  "Compiling main.swift",
  "Emitting module Demo",
  "Compiling ParserTests.swift",
  "Emitting module DemoTests",
  "Linking Demo",
  "Linking DemoTests",
  "Signing Demo",
];

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
  async "build.run"(args, signal, progress) {
    // a slow fake build (8 s): long enough to ask how it goes, or to cancel it; it says how far it got
    for (const [i, step] of DEMO_BUILD_STEPS.entries()) {
      progress(i / DEMO_BUILD_STEPS.length, `[${i + 1}/${DEMO_BUILD_STEPS.length}] ${step}`);
      await sleep(1000, signal);
    }
    return { status: "succeeded", warnings: ["Parser.swift:3: 'parse' could return an empty array"], seconds: 8 };
  },
  async "tests.run"(args, signal) {
    await sleep(1200, signal);
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

/** Run a tool: its result (a promise), or undefined when the console has no such tool. The slow
 * ones stop when `signal` (an AbortSignal) aborts, and say how far they got with
 * `progress(fraction, message)`. */
export function runTool(name, args, signal, progress = () => {}) {
  const tool = TOOLS[name];
  return tool ? tool(args, signal, progress) : undefined;
}

// ---- the project panel --------------------------------------------------------------------------

export async function renderFiles() {
  $("files").replaceChildren(...(await project.paths()).map((p) => el("li", { text: p })));
  $("project-name").textContent = `Tools answer from ${project.name}.`;
}

/** The folder picker, where the browser has one (showDirectoryPicker). */
export function wireFolderPicker() {
  if (typeof window.showDirectoryPicker !== "function") return;
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
