package encryption

import "fmt"

// TransitPolicy is the Vault policy of edgefleet-kms's token for the transit key named key of
// the transit engine mounted at mount: wrap and unwrap with that key and read its latest
// version, nothing else (not rotate it, not export it, not read any other key).
func TransitPolicy(mount, key string) string {
	return fmt.Sprintf(`path %[1]q { capabilities = ["update"] }
path %[2]q { capabilities = ["update"] }
path %[3]q { capabilities = ["read"] }
`, mount+"/encrypt/"+key, mount+"/decrypt/"+key, mount+"/keys/"+key)
}
