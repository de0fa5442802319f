import Foundation
import OfflineSync
import OfflineSyncService

/// The operator's console as HTML: server-rendered, one stylesheet inline, no script. Every
/// value is escaped, by Unicode scalar, for where it goes: ``text(_:)`` in an element, where
/// invisible characters that reorder or hide text (bidirectional controls, control
/// characters, line separators) are shown as their code point, so an identity, table or item
/// id reads as what it is; ``attribute(_:)`` in a quoted attribute, where they keep their
/// value (an explainer field submits what it was given). Nothing on the page comes from a
/// row's fields.
enum ConsolePage {
    /// What one view of the console shows.
    struct Snapshot {
        var uptimeSeconds: Int64
        var channels: Int
        var counters: [MetricTotals.Line]
        var tables: [TableRowCount]
        var tablesError: String?
        var refusals: [RecentRefusals.Entry]
        var explainer: Explainer
    }

    /// The explainer's form as submitted, and its answer.
    struct Explainer {
        var identity = "", table = "", id = "", roles = "", claims = ""
        var answer: RuleExplanation?
        var error: String?
    }

    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}\
        table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}\
        .num{text-align:right}.yes{color:#075}.no{color:#a00}label{display:inline-block;margin:0 1em 0.4em 0}\
        input[type=text],input[type=password]{width:14em}.error{color:#a00}\
        .ctl{font:0.85em monospace;color:#a00;background:#fee;padding:0 2px;border-radius:2px}
        """

    /// The page around `body`.
    static func document(title: String, _ body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(text(title))</title><style>\(style)</style></head>
        <body>\(body)</body></html>
        """
    }

    /// The sign-in form; `message` says why it is shown again.
    static func login(message: String?) -> String {
        document(title: "OfflineSync console: sign in", """
            <h1>OfflineSync console</h1>
            \(message.map { "<p class=\"error\" id=\"login-error\">\(text($0))</p>" } ?? "")
            <form method="post" action="/admin/login">
            <label>Admin key <input type="password" name="key" id="key" autocomplete="current-password"></label>
            <button type="submit" id="sign-in">Sign in</button>
            </form>
            """)
    }

    /// The console.
    static func dashboard(_ snapshot: Snapshot) -> String {
        document(title: "OfflineSync console", """
            <h1>OfflineSync console</h1>
            <form method="post" action="/admin/logout"><button type="submit">Sign out</button></form>
            <p>Up for \(snapshot.uptimeSeconds) s.</p>
            <h2>Connected now</h2>
            <p id="channels">\(snapshot.channels) change channel(s) open.</p>
            \(countersSection(snapshot))
            \(tablesSection(snapshot))
            \(refusalsSection(snapshot.refusals))
            \(explainerSection(snapshot.explainer))
            """)
    }

    private static func countersSection(_ snapshot: Snapshot) -> String {
        let rows = snapshot.counters.map { line in
            let rate = snapshot.uptimeSeconds > 0 ? line.value / Double(snapshot.uptimeSeconds) : 0
            return "<tr><td>\(text(line.label))</td><td class=\"num\">\(format(line.value))</td><td class=\"num\">\(format(rate))</td></tr>"
        }
        return """
            <h2>Throughput and errors</h2>
            <p>From the counters of <code>/metrics</code>, since the server started.</p>
            <table id="counters"><tr><th>counter</th><th>total</th><th>per second</th></tr>\(rows.joined())</table>
            """
    }

    private static func tablesSection(_ snapshot: Snapshot) -> String {
        if let error = snapshot.tablesError {
            return "<h2>Tables</h2><p class=\"error\">The store could not be read: \(text(error))</p>"
        }
        let rows = snapshot.tables.map { count in
            "<tr><td>\(text(count.table))</td><td class=\"num\">\(count.rows)</td><td class=\"num\">\(count.deleted)</td></tr>"
        }
        return """
            <h2>Tables</h2>
            <table id="tables"><tr><th>table</th><th>rows</th><th>deleted (tombstones)</th></tr>\(rows.joined())</table>
            """
    }

    private static func refusalsSection(_ refusals: [RecentRefusals.Entry]) -> String {
        let rows = refusals.map { entry in
            let query = explainQuery(identity: entry.identity, table: entry.table, id: entry.itemId)
            return "<tr><td>\(text(entry.time.description))</td><td>\(text(entry.identity))</td><td>\(text(entry.table))</td>"
                + "<td>\(entry.operation.rawValue)</td><td>\(text(entry.itemId))</td><td><a href=\"/admin?\(attribute(query))\">why?</a></td></tr>"
        }
        return """
            <h2>Recent refusals</h2>
            <p>Operations the sync rules refused (403), newest first. "why?" asks the explainer which grant would admit it.</p>
            <table id="refusals"><tr><th>time</th><th>identity</th><th>table</th><th>operation</th><th>item</th><th></th></tr>\(rows.joined())</table>
            """
    }

    private static func explainerSection(_ explainer: Explainer) -> String {
        func field(_ name: String, _ label: String, _ value: String) -> String {
            "<label>\(label) <input type=\"text\" name=\"\(name)\" id=\"\(name)\" value=\"\(attribute(value))\"></label>"
        }
        var answer = ""
        if let error = explainer.error {
            answer = "<p class=\"error\" id=\"explain-error\">\(text(error))</p>"
        } else if let explanation = explainer.answer {
            answer = explanationTable(explanation)
        }
        return """
            <h2>Rules explainer</h2>
            <p>Which grant of the sync rules admits each operation of an identity on a row, or why none does.</p>
            <form method="get" action="/admin">
            \(field("identity", "Identity", explainer.identity))\(field("table", "Table", explainer.table))\(field("id", "Row id", explainer.id))<br>
            \(field("roles", "Roles (comma-separated)", explainer.roles))\(field("claims", "Claims (name=value, comma-separated)", explainer.claims))
            <button type="submit" id="explain">Explain</button>
            </form>
            \(answer)
            """
    }

    private static func explanationTable(_ explanation: RuleExplanation) -> String {
        let rows = explanation.decisions.map { decision in
            let grants = decision.grants.isEmpty ? "no grant on this table"
                : decision.grants.map { "\(text($0.grant)): \($0.admits ? "admits" : "does not admit") (\(text($0.reason)))" }
                    .joined(separator: "<br>")
            let verdict = decision.allowed ? "<span class=\"yes\">allowed</span>" : "<span class=\"no\">refused</span>"
            return "<tr data-operation=\"\(attribute(decision.operation))\" data-allowed=\"\(decision.allowed)\"><td>\(text(decision.operation))</td>"
                + "<td>\(verdict)</td><td>\(grants)</td></tr>"
        }
        return """
            <p id="explain-summary">Table <b><bdi>\(text(explanation.table))</bdi></b> (\(text(explanation.storage))), \
            row <b><bdi>\(text(explanation.id))</bdi></b>: \
            \(explanation.exists ? (explanation.deleted ? "deleted" : "exists") : "does not exist").</p>
            <table id="explanation"><tr><th>operation</th><th>decision</th><th>grants</th></tr>\(rows.joined())</table>
            """
    }

    /// The console's query string for an explainer question.
    static func explainQuery(identity: String, table: String, id: String) -> String {
        [("identity", identity), ("table", table), ("id", id)].map { "\($0)=\(percentEncoded($1))" }.joined(separator: "&")
    }

    /// RFC 3986's unreserved characters stay, every other byte is encoded (`.alphanumerics`
    /// would leave letters and marks of every script, combining ones included, unencoded).
    private static func percentEncoded(_ text: String) -> String {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(format: "%.2f", value)
    }

    /// `value` for an element's content: the characters HTML gives a meaning escaped, and each
    /// invisible one that could disguise the text (``isDisguising(_:)``) shown as its code
    /// point, `[U+202E]`, in a `ctl` span.
    static func text(_ value: String) -> String {
        escaped(value) { scalar in "<span class=\"ctl\">[U+\(codePoint(scalar))]</span>" }
    }

    /// `value` for a double-quoted attribute: the characters HTML gives a meaning escaped, and
    /// the bidirectional controls and separators written as character references, so the page's
    /// source holds none while the attribute keeps its value.
    static func attribute(_ value: String) -> String {
        escaped(value) { scalar in
            scalar.properties.generalCategory == .control ? String(Character(scalar)) : "&#x\(codePoint(scalar));"
        }
    }

    /// Escapes by Unicode scalar, never by `Character`: `"` followed by a combining mark is one
    /// `Character` that is not equal to `"`, and would pass through a per-character escape
    /// whole, ending the attribute it sits in.
    private static func escaped(_ value: String, disguising: (Unicode.Scalar) -> String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                if isDisguising(scalar) { out += disguising(scalar) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }

    /// Whether a scalar is invisible and changes how the text around it reads: a bidirectional
    /// control (U+202E turns what follows around), a control character, or a line or paragraph
    /// separator.
    static func isDisguising(_ scalar: Unicode.Scalar) -> Bool {
        let properties = scalar.properties
        switch properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: return properties.isBidiControl
        }
    }

    /// `U+XXXX`'s hex digits: at least four, upper case.
    private static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
