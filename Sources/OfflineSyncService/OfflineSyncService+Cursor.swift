import OfflineSync

extension OfflineSyncService {
    /// The two ways a shared table is read; the cursor names the one it belongs to, and a
    /// cursor of the other way (the caller's roles changed) starts the pull over.
    enum PullMode: String {
        case table = "t", view = "v"
    }

    /// A pull cursor, the one form every pull writes and reads:
    /// - `<epoch>:<sequence>` for an owner-only table (its own sequence);
    /// - `<epoch>:<mode>:<sequence>` for a shared table (the shared sequence), read as a table
    ///   (`t`) or as the caller's view (`v`);
    /// - `<epoch>:v:<event>:<after>:<group in hex>` while a view pull sweeps a group's log.
    ///
    /// The epoch changes when a table's sequence starts over; a cursor of another epoch makes
    /// the pull start again (`cursorReset`), anything else this service did not write is
    /// ``SyncError/Code/invalidCursor``.
    package struct PullCursor {
        var epoch: String
        /// `nil` for an owner-only table's cursor.
        var mode: PullMode?
        var position: ViewCursor

        init(epoch: String, mode: PullMode?, position: ViewCursor) {
            self.epoch = epoch
            self.mode = mode
            self.position = position
        }

        package init(parsing text: String) throws {
            let invalid = SyncError(.invalidCursor, "the cursor is not one this service issued")
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            epoch = String(parts[0])
            switch parts.count {
            case 2:
                guard let sequence = Int64(parts[1]), sequence >= 0 else { throw invalid }
                mode = nil
                position = ViewCursor(main: sequence)
            case 3:
                guard let given = PullMode(rawValue: String(parts[1])), let sequence = Int64(parts[2]), sequence >= 0 else {
                    throw invalid
                }
                mode = given
                position = ViewCursor(main: sequence)
            case 5:
                guard parts[1] == Substring(PullMode.view.rawValue), let event = Int64(parts[2]), event > 0,
                      let after = Int64(parts[3]), let text = OfflineSyncService.unhex(parts[4]) else { throw invalid }
                // Only a group this service names: the cursor is client input.
                let group = GroupKey(text)
                guard Group(key: group) != nil else { throw invalid }
                mode = .view
                position = ViewCursor(main: event - 1, sweep: ViewCursor.Sweep(event: event, group: group, after: after))
            default:
                throw invalid
            }
        }

        package var text: String {
            guard let mode else { return "\(epoch):\(position.main)" }
            return "\(epoch):\(mode.rawValue):\(position.text)"
        }
    }

    /// `text`'s UTF-8 bytes in lowercase hex, two digits a byte: how a cursor, and a change
    /// notice between server instances, carry a group key (which may hold any byte).
    package static func hex(_ text: String) -> String {
        text.utf8.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
    }

    /// The UTF-8 string whose bytes `text` spells in hex as ``hex(_:)`` writes it (lowercase,
    /// two digits a byte); `nil` for anything else. Read byte by byte: a cursor is client
    /// input, and any character, of any width, may stand where a digit should.
    package static func unhex(_ text: Substring) -> String? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
