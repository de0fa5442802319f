import Foundation
import OfflineSync
import OfflineSyncService

/// The operator's console as HTML: server-rendered, one stylesheet inline, no script. Every
/// value shown is escaped (``html(_:)``); nothing on the page comes from a row's fields.
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
        input[type=text],input[type=password]{width:14em}.error{color:#a00}
        """

    /// The page around `body`.
    static func document(title: String, _ body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(html(title))</title><style>\(style)</style></head>
        <body>\(body)</body></html>
        """
    }

    /// The sign-in form; `message` says why it is shown again.
    static func login(message: String?) -> String {
        document(title: "OfflineSync console: sign in", """
            <h1>OfflineSync console</h1>
            \(message.map { "<p class=\"error\" id=\"login-error\">\(html($0))</p>" } ?? "")
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
            return "<tr><td>\(html(line.label))</td><td class=\"num\">\(format(line.value))</td><td class=\"num\">\(format(rate))</td></tr>"
        }
        return """
            <h2>Throughput and errors</h2>
            <p>From the counters of <code>/metrics</code>, since the server started.</p>
            <table id="counters"><tr><th>counter</th><th>total</th><th>per second</th></tr>\(rows.joined())</table>
            """
    }

    private static func tablesSection(_ snapshot: Snapshot) -> String {
        if let error = snapshot.tablesError {
            return "<h2>Tables</h2><p class=\"error\">The store could not be read: \(html(error))</p>"
        }
        let rows = snapshot.tables.map { count in
            "<tr><td>\(html(count.table))</td><td class=\"num\">\(count.rows)</td><td class=\"num\">\(count.deleted)</td></tr>"
        }
        return """
            <h2>Tables</h2>
            <table id="tables"><tr><th>table</th><th>rows</th><th>deleted (tombstones)</th></tr>\(rows.joined())</table>
            """
    }

    private static func refusalsSection(_ refusals: [RecentRefusals.Entry]) -> String {
        let rows = refusals.map { entry in
            let query = explainQuery(identity: entry.identity, table: entry.table, id: entry.itemId)
            return "<tr><td>\(html(entry.time.description))</td><td>\(html(entry.identity))</td><td>\(html(entry.table))</td>"
                + "<td>\(entry.operation.rawValue)</td><td>\(html(entry.itemId))</td><td><a href=\"/admin?\(html(query))\">why?</a></td></tr>"
        }
        return """
            <h2>Recent refusals</h2>
            <p>Operations the sync rules refused (403), newest first. "why?" asks the explainer which grant would admit it.</p>
            <table id="refusals"><tr><th>time</th><th>identity</th><th>table</th><th>operation</th><th>item</th><th></th></tr>\(rows.joined())</table>
            """
    }

    private static func explainerSection(_ explainer: Explainer) -> String {
        func field(_ name: String, _ label: String, _ value: String) -> String {
            "<label>\(label) <input type=\"text\" name=\"\(name)\" id=\"\(name)\" value=\"\(html(value))\"></label>"
        }
        var answer = ""
        if let error = explainer.error {
            answer = "<p class=\"error\" id=\"explain-error\">\(html(error))</p>"
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
                : decision.grants.map { "\(html($0.grant)): \($0.admits ? "admits" : "does not admit") (\(html($0.reason)))" }
                    .joined(separator: "<br>")
            let verdict = decision.allowed ? "<span class=\"yes\">allowed</span>" : "<span class=\"no\">refused</span>"
            return "<tr data-operation=\"\(html(decision.operation))\" data-allowed=\"\(decision.allowed)\"><td>\(html(decision.operation))</td>"
                + "<td>\(verdict)</td><td>\(grants)</td></tr>"
        }
        return """
            <p id="explain-summary">Table <b>\(html(explanation.table))</b> (\(html(explanation.storage))), row <b>\(html(explanation.id))</b>: \
            \(explanation.exists ? (explanation.deleted ? "deleted" : "exists") : "does not exist").</p>
            <table id="explanation"><tr><th>operation</th><th>decision</th><th>grants</th></tr>\(rows.joined())</table>
            """
    }

    /// The console's query string for an explainer question.
    static func explainQuery(identity: String, table: String, id: String) -> String {
        [("identity", identity), ("table", table), ("id", id)].map { "\($0)=\(percentEncoded($1))" }.joined(separator: "&")
    }

    private static func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(format: "%.2f", value)
    }

    /// `text` with the characters HTML gives a meaning escaped, for an element or an attribute.
    static func html(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
