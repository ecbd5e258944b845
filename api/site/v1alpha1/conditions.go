package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The provider kinds are Cluster-API condition getters and setters (v1beta2 contract: the
// conditions are []metav1.Condition at status.conditions), so that Cluster-API's utilities —
// util/paused's EnsurePausedCondition, the patch helper — read and write them.

// GetConditions returns status.conditions.
func (c *EdgeCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets status.conditions.
func (c *EdgeCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// GetConditions returns status.conditions.
func (m *EdgeMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets status.conditions.
func (m *EdgeMachine) SetConditions(conds []metav1.Condition) { m.Status.Conditions = conds }

// GetConditions returns status.conditions.
func (c *EdgeBootstrapConfig) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets status.conditions.
func (c *EdgeBootstrapConfig) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }
