package events

// AdminEndpoints are the endpoints only a tenant's admin credential may request
// (contract v1.x, "Roles" in the README): they erase or rewrite a user's memory
// wholesale, read the tenant's raw events or dead letters, move it in or out, or
// change what the pipeline does, or write the tenant scope every agent of the
// tenant reads. NATS permissions enforce it: an agent credential's publish allow
// list names every other endpoint and none of these, so the server refuses the
// request before any service sees it.
var AdminEndpoints = []string{
	EndpointDelete, EndpointReset, EndpointConsolidate, EndpointItemDeleteScope,
	EndpointBackupsRestore, EndpointCompress, EndpointPolicySet, EndpointPolicyRollback,
	EndpointEventsList, EndpointEventsGet, EndpointEventsCount,
	EndpointExport, EndpointImport, EndpointForget,
	EndpointDLQList, EndpointDLQReplay,
	EndpointTenantAppend, EndpointTenantAdd, EndpointTenantItemSave,
}

// AgentEndpoints are the endpoints an agent credential may request: Endpoints
// less AdminEndpoints, in the order of Endpoints.
var AgentEndpoints = func() []string {
	var out []string
	for _, ep := range Endpoints {
		if !oneOf(ep, AdminEndpoints) {
			out = append(out, ep)
		}
	}
	return out
}()
