import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncWire

extension CognitoRoutes {
    // MARK: Pool operations (developer keys)

    func describePoolUsage(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        return .object([("IdentityPoolUsage", Self.poolUsage(try await datasets.describePoolUsage(pool: call.parameter("pool"))))])
    }

    func listPoolUsage(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let limit = try call.integer("maxResults").map(Int.init)
        let (pools, next) = try await datasets.listPoolUsage(nextToken: call.query["nextToken"], maxResults: limit)
        var members: [(key: String, value: JSON)] = [
            ("IdentityPoolUsages", .array(pools.map(Self.poolUsage))), ("Count", .number(String(pools.count))),
            ("MaxResults", .number(String(limit ?? DatasetService.defaultPageSize))),
        ]
        if let next { members.append(("NextToken", .string(next))) }
        return .object(members)
    }

    func getConfiguration(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        return Self.configuration(try await datasets.configuration(pool: call.parameter("pool")))
    }

    func setConfiguration(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        var push: PushSyncConfiguration?
        if let value = call.body["PushSync"] {
            guard case .object = value else { throw CognitoError.invalidParameter("PushSync must be an object") }
            var arns: [String] = []
            if let list = value["ApplicationArns"] {
                guard case .array(let items) = list else { throw CognitoError.invalidParameter("ApplicationArns must be a list") }
                arns = try items.map { item in
                    guard case .string(let arn) = item else { throw CognitoError.invalidParameter("ApplicationArns holds strings") }
                    return arn
                }
            }
            push = PushSyncConfiguration(applicationArns: arns, roleArn: try CognitoJSON.string(value["RoleArn"], "RoleArn"))
        }
        var streams: StreamsConfiguration?
        if let value = call.body["CognitoStreams"] {
            guard case .object = value, let name = try CognitoJSON.string(value["StreamName"], "StreamName") else {
                throw CognitoError.invalidParameter("CognitoStreams needs a StreamName")
            }
            let status = try CognitoJSON.string(value["StreamingStatus"], "StreamingStatus") ?? "ENABLED"
            guard status == "ENABLED" || status == "DISABLED" else {
                throw CognitoError.invalidParameter("StreamingStatus is ENABLED or DISABLED")
            }
            streams = StreamsConfiguration(streamName: name, roleArn: try CognitoJSON.string(value["RoleArn"], "RoleArn"),
                                           enabled: status == "ENABLED")
        }
        return Self.configuration(try await datasets.setConfiguration(pool: call.parameter("pool"), pushSync: push, streams: streams))
    }

    func getEvents(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let events = try await datasets.events(pool: call.parameter("pool"))
        return .object([("Events", .object(events.sorted { $0.key < $1.key }.map { ($0.key, JSON.string($0.value)) }))])
    }

    func setEvents(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        guard case .object(let members)? = call.body["Events"] else { throw CognitoError.invalidParameter("Events is required") }
        var events: [String: String] = [:]
        for member in members {
            guard case .string(let target) = member.value else { throw CognitoError.invalidParameter("an event's target is a string") }
            events[member.key] = target
        }
        try await datasets.setEvents(pool: call.parameter("pool"), events)
        return .object([])
    }

    func bulkPublish(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let pool = call.parameter("pool")
        do {
            try await datasets.bulkPublish(pool: pool)
        } catch let error as SyncError where error.code == .busy {
            throw CognitoError("DuplicateRequestException", .badRequest, error.message)
        } catch let error as SyncError where error.code == .rejected {
            throw CognitoError("AlreadyStreamedException", .badRequest, error.message)
        }
        return .object([("IdentityPoolId", .string(pool))])
    }

    func bulkPublishDetails(_ call: Call) async throws -> JSON {
        try requireDeveloper(call)
        let details = try await datasets.bulkPublishDetails(pool: call.parameter("pool"))
        var members: [(key: String, value: JSON)] = [
            ("IdentityPoolId", .string(details.identityPoolId)), ("BulkPublishStatus", .string(details.status)),
        ]
        if let start = details.startTime { members.append(("BulkPublishStartTime", CognitoJSON.date(start))) }
        if let end = details.completeTime { members.append(("BulkPublishCompleteTime", CognitoJSON.date(end))) }
        if let failure = details.failureMessage { members.append(("FailureMessage", .string(failure))) }
        return .object(members)
    }

    // MARK: Shapes of the pool-level answers

    static func poolUsage(_ usage: PoolUsage) -> JSON {
        var members: [(key: String, value: JSON)] = [
            ("IdentityPoolId", .string(usage.identityPoolId)), ("SyncSessionsCount", .number(String(usage.syncSessionsCount))),
            ("DataStorage", .number(String(usage.dataStorage))),
        ]
        if let date = usage.lastModifiedDate { members.append(("LastModifiedDate", CognitoJSON.date(date))) }
        return .object(members)
    }

    static func configuration(_ configuration: PoolConfiguration) -> JSON {
        var members: [(key: String, value: JSON)] = [("IdentityPoolId", .string(configuration.identityPoolId))]
        if let push = configuration.pushSync {
            var fields: [(key: String, value: JSON)] = [("ApplicationArns", .array(push.applicationArns.map(JSON.string)))]
            if let role = push.roleArn { fields.append(("RoleArn", .string(role))) }
            members.append(("PushSync", .object(fields)))
        }
        if let streams = configuration.streams {
            var fields: [(key: String, value: JSON)] = [("StreamName", .string(streams.streamName))]
            if let role = streams.roleArn { fields.append(("RoleArn", .string(role))) }
            fields.append(("StreamingStatus", .string(streams.enabled ? "ENABLED" : "DISABLED")))
            members.append(("CognitoStreams", .object(fields)))
        }
        return .object(members)
    }
}
